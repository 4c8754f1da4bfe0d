import { BUILTIN_HOSTS } from '../egress/builtins.ts';

/**
 * The environment of every process in a sandbox: the gateway as its proxy (the sandbox has no
 * other route out) and the deployment CA, at `caPath` inside the sandbox, as the trust store
 * of curl/OpenSSL, Node, git and Python. Holds no secret.
 */
export function sandboxProxyEnv(gatewayUrl: string, caPath: string): Record<string, string> {
  return {
    HTTP_PROXY: gatewayUrl,
    HTTPS_PROXY: gatewayUrl,
    http_proxy: gatewayUrl,
    https_proxy: gatewayUrl,
    NO_PROXY: '',
    NODE_USE_ENV_PROXY: '1',
    SSL_CERT_FILE: caPath,
    NODE_EXTRA_CA_CERTS: caPath,
    GIT_SSL_CAINFO: caPath,
    REQUESTS_CA_BUNDLE: caPath,
    CURL_CA_BUNDLE: caPath,
    // OpenTelemetry SDKs in the sandbox export to the deployment's collector, through the gateway.
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://${BUILTIN_HOSTS.otel}`,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
  };
}
