import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CliError } from './errors.ts';

/** Where the CLI reaches the API and with which token. */
export interface Profile {
  url: string;
  token: string;
}

type Env = Record<string, string | undefined>;

/** The stored profile's file: under $XDG_CONFIG_HOME, else ~/.config. */
export function profilePath(env: Env): string {
  const base = env.XDG_CONFIG_HOME || path.join(env.HOME || os.homedir(), '.config');
  return path.join(base, 'crewhouse', 'config.json');
}

/** The base URL a person typed, reduced to its origin plus path, without a trailing slash or /api/v1. */
export function normaliseUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new CliError(`--url must be an http(s) address like http://localhost:8080, not "${raw}"`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new CliError(`--url must be http or https, not ${u.protocol.replace(':', '')}`);
  return (u.origin + u.pathname).replace(/\/+$/, '').replace(/\/api\/v1$/, '');
}

/**
 * The profile in effect: CREWHOUSE_URL / CREWHOUSE_TOKEN win over the stored one, each on its
 * own (a script may point a stored login at another token).
 */
export function loadProfile(env: Env): Profile {
  let stored: Partial<Profile> = {};
  const file = profilePath(env);
  if (fs.existsSync(file)) {
    try {
      stored = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<Profile>;
    } catch (err) {
      throw new CliError(`${file} is not valid JSON (${(err as Error).message}); run crewhouse login again`);
    }
  }
  const url = env.CREWHOUSE_URL || stored.url;
  const token = env.CREWHOUSE_TOKEN || stored.token;
  if (!url || !token) throw new CliError('not logged in: run crewhouse login --url URL --token TOKEN, or set CREWHOUSE_URL and CREWHOUSE_TOKEN');
  return { url: normaliseUrl(url), token };
}

/** Writes the profile readable by its owner only (the token is a credential). */
export function saveProfile(env: Env, profile: Profile): string {
  const file = profilePath(env);
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  // Created 0600 before the token is written, and tightened if an older file was looser.
  const fd = fs.openSync(file, 'w', 0o600);
  try {
    fs.fchmodSync(fd, 0o600);
    fs.writeSync(fd, JSON.stringify({ url: profile.url, token: profile.token }, null, 2) + '\n');
  } finally {
    fs.closeSync(fd);
  }
  return file;
}

/** Removes the stored profile; false when there was none. */
export function removeProfile(env: Env): boolean {
  const file = profilePath(env);
  if (!fs.existsSync(file)) return false;
  fs.rmSync(file);
  return true;
}
