import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';
import { captureLogger } from '../../../test/harness.ts';
import { sdkLogger } from './client.ts';

test("the Slack SDK's own log lines go through the logger's redaction (an error quoting a token or a header)", () => {
  const { logger, lines } = captureLogger('info');
  const token = `xapp-1-${crypto.randomBytes(16).toString('hex')}`;
  const log = sdkLogger(logger);
  log.warn('Failed to retrieve a new WSS URL', new Error(`An API error occurred: invalid_auth for ${token}`));
  log.error('http request failed', { toString: () => `Authorization: Bearer ${token}` });
  // Debug lines (whole payloads) are not kept at all.
  (log.debug as (...msg: unknown[]) => void)('a whole payload', token);
  assert.equal(lines.length, 2);
  for (const l of lines) assert.ok(!l.includes(token), l);
  assert.match(lines[0], /Failed to retrieve a new WSS URL Error: An API error occurred: invalid_auth for \[redacted\]/);
});
