import crypto from 'node:crypto';
import net from 'node:net';
import { AsnConvert, OctetString } from '@peculiar/asn1-schema';
import * as x509 from '@peculiar/asn1-x509';

/** A certificate and its private key, both PEM. */
export interface KeyPair {
  certPem: string;
  keyPem: string;
}

const ECDSA_SHA256 = '1.2.840.10045.4.3.2';
const COMMON_NAME = '2.5.4.3';
const ORGANIZATION = '2.5.4.10';
const DAY_MS = 86_400_000;

const toArrayBuffer = (b: Buffer): ArrayBuffer => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
const pem = (der: ArrayBuffer) => `-----BEGIN CERTIFICATE-----\n${Buffer.from(der).toString('base64').replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`;

function nameOf(commonName: string): x509.Name {
  const attr = (type: string, value: string) => new x509.RelativeDistinguishedName([new x509.AttributeTypeAndValue({ type, value: new x509.AttributeValue({ utf8String: value }) })]);
  return new x509.Name([attr(ORGANIZATION, 'Crewhouse'), attr(COMMON_NAME, commonName)]);
}

function extension(extnID: string, critical: boolean, value: unknown): x509.Extension {
  return new x509.Extension({ extnID, critical, extnValue: new OctetString(AsnConvert.serialize(value)) });
}

/** SHA-1 of the public key bits: the key identifier of RFC 5280 4.2.1.2 (1). */
const keyIdOf = (spki: x509.SubjectPublicKeyInfo) => toArrayBuffer(crypto.createHash('sha1').update(Buffer.from(spki.subjectPublicKey)).digest());

function spkiOf(key: crypto.KeyObject): x509.SubjectPublicKeyInfo {
  return AsnConvert.parse(crypto.createPublicKey(key).export({ type: 'spki', format: 'der' }), x509.SubjectPublicKeyInfo);
}

function sign(tbs: x509.TBSCertificate, issuerKey: crypto.KeyObject): string {
  const tbsDer = Buffer.from(AsnConvert.serialize(tbs));
  const signature = crypto.sign('sha256', tbsDer, { key: issuerKey, dsaEncoding: 'der' });
  const cert = new x509.Certificate({ tbsCertificate: tbs, signatureAlgorithm: new x509.AlgorithmIdentifier({ algorithm: ECDSA_SHA256 }), signatureValue: toArrayBuffer(signature) });
  return pem(AsnConvert.serialize(cert));
}

function serial(): ArrayBuffer {
  const b = crypto.randomBytes(16);
  b[0] &= 0x7f; // positive
  b[0] |= 0x01; // and without a leading zero octet
  return toArrayBuffer(b);
}

const newKey = () => crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
const keyPem = (k: crypto.KeyObject) => k.export({ type: 'pkcs8', format: 'pem' }) as string;

/** A self-signed certificate authority (ECDSA P-256) that may sign server certificates only. */
export function mintCertificateAuthority(commonName: string, validDays = 3650): KeyPair {
  const key = newKey();
  const spki = spkiOf(key);
  const now = Date.now();
  const tbs = new x509.TBSCertificate({
    version: x509.Version.v3,
    serialNumber: serial(),
    signature: new x509.AlgorithmIdentifier({ algorithm: ECDSA_SHA256 }),
    issuer: nameOf(commonName),
    subject: nameOf(commonName),
    validity: new x509.Validity({ notBefore: new Date(now - DAY_MS), notAfter: new Date(now + validDays * DAY_MS) }),
    subjectPublicKeyInfo: spki,
    extensions: new x509.Extensions([
      extension(x509.id_ce_basicConstraints, true, new x509.BasicConstraints({ cA: true, pathLenConstraint: 0 })),
      extension(x509.id_ce_keyUsage, true, new x509.KeyUsage(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign)),
      extension(x509.id_ce_subjectKeyIdentifier, false, new x509.SubjectKeyIdentifier(keyIdOf(spki))),
    ]),
  });
  return { certPem: sign(tbs, key), keyPem: keyPem(key) };
}

/** Parsed issuer material, made once and reused for every leaf. */
export interface Issuer {
  key: crypto.KeyObject;
  subject: x509.Name;
  keyId: ArrayBuffer;
  /** One key for every leaf of this issuer: leaves differ by name only, and signing is then one ECDSA operation. */
  leafKey: crypto.KeyObject;
  leafKeyPem: string;
  leafSpki: x509.SubjectPublicKeyInfo;
}

export function issuerOf(ca: KeyPair): Issuer {
  const cert = AsnConvert.parse(Buffer.from(ca.certPem.replace(/-----[A-Z ]+-----|\s+/g, ''), 'base64'), x509.Certificate);
  const leafKey = newKey();
  return {
    key: crypto.createPrivateKey(ca.keyPem),
    subject: cert.tbsCertificate.subject,
    keyId: keyIdOf(cert.tbsCertificate.subjectPublicKeyInfo),
    leafKey,
    leafKeyPem: keyPem(leafKey),
    leafSpki: spkiOf(leafKey),
  };
}

/** A server certificate for one host name or IP address, signed by `issuer`, valid `validDays`. */
export function mintLeaf(issuer: Issuer, host: string, validDays = 30): KeyPair {
  const now = Date.now();
  const san = net.isIP(host) ? new x509.GeneralName({ iPAddress: host }) : new x509.GeneralName({ dNSName: host });
  const tbs = new x509.TBSCertificate({
    version: x509.Version.v3,
    serialNumber: serial(),
    signature: new x509.AlgorithmIdentifier({ algorithm: ECDSA_SHA256 }),
    issuer: issuer.subject,
    subject: nameOf(host.slice(0, 64)),
    validity: new x509.Validity({ notBefore: new Date(now - DAY_MS), notAfter: new Date(now + validDays * DAY_MS) }),
    subjectPublicKeyInfo: issuer.leafSpki,
    extensions: new x509.Extensions([
      extension(x509.id_ce_basicConstraints, true, new x509.BasicConstraints({ cA: false })),
      extension(x509.id_ce_keyUsage, true, new x509.KeyUsage(x509.KeyUsageFlags.digitalSignature)),
      extension(x509.id_ce_extKeyUsage, false, new x509.ExtendedKeyUsage([x509.id_kp_serverAuth])),
      extension(x509.id_ce_subjectAltName, false, new x509.SubjectAlternativeName([san])),
      extension(x509.id_ce_authorityKeyIdentifier, false, new x509.AuthorityKeyIdentifier({ keyIdentifier: new x509.KeyIdentifier(issuer.keyId) })),
    ]),
  });
  return { certPem: sign(tbs, issuer.key), keyPem: issuer.leafKeyPem };
}
