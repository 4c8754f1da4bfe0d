import { useEffect, useState } from 'react';

/** The part of the URL after `#`: the console routes by hash, so every page is served by index.html. */
export function useHash(): string {
  const [hash, setHash] = useState(() => window.location.hash);
  useEffect(() => {
    const changed = () => setHash(window.location.hash);
    window.addEventListener('hashchange', changed);
    return () => window.removeEventListener('hashchange', changed);
  }, []);
  return hash;
}

/** The setup token of a `#setup?token=...` link, or null when the hash is something else. */
export function setupTokenOf(hash: string): string | null {
  const m = /^#\/?setup(?:\?(.*))?$/.exec(hash);
  if (!m) return null;
  return new URLSearchParams(m[1] ?? '').get('token') ?? '';
}

/** Moves to another hash without leaving an entry for the page we come from (used after setup). */
export function replaceHash(hash: string) {
  window.history.replaceState(null, '', `${window.location.pathname}${window.location.search}${hash}`);
  window.dispatchEvent(new HashChangeEvent('hashchange'));
}

/** The path segments and query of a `#/a/b?x=1` hash. */
export function locationOf(hash: string): { segments: string[]; query: URLSearchParams } {
  const m = /^#\/?([^?]*)(?:\?(.*))?$/.exec(hash);
  const path = m?.[1] ?? '';
  return { segments: path.split('/').filter(Boolean).map((s) => decodeURIComponent(s)), query: new URLSearchParams(m?.[2] ?? '') };
}

/** Goes to another page of the console. */
export function go(hash: string) {
  window.location.hash = hash;
}
