import { sql, type RawBuilder } from 'kysely';
import { chatErrors } from '../http/errors.ts';
import { dbId } from '../http/params.ts';

/** A narrow term as the client sent it. */
export interface NarrowTerm {
  operator: string;
  operand: unknown;
  negated: boolean;
}

/** A narrow term with its names resolved to ids. */
export type Term =
  | { kind: 'stream'; streamId: number; negated: boolean }
  | { kind: 'topic'; topic: string; negated: boolean }
  | { kind: 'dm'; key: string; negated: boolean }
  | { kind: 'dm-including'; userId: number; negated: boolean }
  | { kind: 'sender'; userId: number; negated: boolean }
  | { kind: 'search'; words: string[] }
  | { kind: 'is'; what: 'mentioned' | 'unread' | 'starred' | 'dm' | 'resolved' | 'read'; negated: boolean }
  | { kind: 'id'; id: number; negated: boolean };

/** Bits of chat_user_messages.flags, as Zulip's UserMessage flags. */
export const FLAG = { read: 1, starred: 2, collapsed: 4, mentioned: 8, stream_wildcard_mentioned: 16, topic_wildcard_mentioned: 32, group_mentioned: 64, has_alert_word: 128 } as const;
export type FlagName = keyof typeof FLAG;
export const FLAG_NAMES = Object.keys(FLAG) as FlagName[];
/** The flags a client may set or clear (POST /messages/flags). */
export const EDITABLE_FLAGS = new Set<FlagName>(['read', 'starred', 'collapsed']);
const ANY_MENTION = FLAG.mentioned | FLAG.stream_wildcard_mentioned | FLAG.topic_wildcard_mentioned | FLAG.group_mentioned;

export function flagNames(bits: number | null): string[] {
  if (bits === null) return ['read', 'historical'];
  const out: string[] = FLAG_NAMES.filter((f) => bits & FLAG[f]);
  // Zulip reports wildcard mentions under their own names and under the legacy one.
  if (bits & FLAG.stream_wildcard_mentioned) out.push('wildcard_mentioned');
  return out;
}

const OPERATORS = new Set(['stream', 'channel', 'streams', 'channels', 'topic', 'subject', 'dm', 'pm-with', 'dm-including', 'group-pm-with', 'sender', 'search', 'is', 'near', 'id', 'with', 'has', 'in']);

/**
 * Parses `narrow` as Zulip accepts it: a JSON list of `{operator, operand, negated}` objects
 * or of legacy `[operator, operand]` pairs.
 */
export function parseNarrow(raw: unknown): NarrowTerm[] {
  if (!Array.isArray(raw)) throw chatErrors.bad('narrow is not a list');
  if (raw.length > 20) throw chatErrors.bad('narrow has too many terms (limit: 20)');
  return raw.map((t, i) => {
    let term: NarrowTerm;
    if (Array.isArray(t)) {
      if (t.length !== 2 || typeof t[0] !== 'string') throw chatErrors.bad(`narrow[${i}] is not a [operator, operand] pair`);
      term = { operator: t[0], operand: t[1], negated: false };
    } else if (t && typeof t === 'object') {
      const o = t as Record<string, unknown>;
      if (typeof o.operator !== 'string') throw chatErrors.bad(`narrow[${i}]["operator"] is not a string`);
      if (!('operand' in o)) throw chatErrors.bad(`narrow[${i}]["operand"] field is missing`);
      if (o.negated !== undefined && typeof o.negated !== 'boolean') throw chatErrors.bad(`narrow[${i}]["negated"] is not a boolean`);
      term = { operator: o.operator, operand: o.operand, negated: o.negated === true };
    } else {
      throw chatErrors.bad(`narrow[${i}] is not a dict`);
    }
    if (!OPERATORS.has(term.operator)) throw chatErrors.bad(`Invalid narrow operator: unknown operator ${term.operator}`);
    if (typeof term.operand === 'string' && term.operand.includes('\u0000')) throw chatErrors.bad(`narrow[${i}] contains NULL (0x00) characters.`);
    return term;
  });
}

export interface NarrowResolver {
  streamId(operand: unknown): Promise<number>;
  userId(operand: unknown): Promise<number>;
  userIds(operand: unknown): Promise<number[]>;
  selfId: number;
}

/** Resolves names to ids, refusing what cannot be answered, with the reason in words. */
export async function resolveNarrow(terms: NarrowTerm[], r: NarrowResolver): Promise<{ terms: Term[]; near: number | null }> {
  const out: Term[] = [];
  let near: number | null = null;
  for (const t of terms) {
    const negated = t.negated;
    switch (t.operator) {
      case 'stream':
      case 'channel':
        out.push({ kind: 'stream', streamId: await r.streamId(t.operand), negated });
        break;
      case 'topic':
      case 'subject':
        if (typeof t.operand !== 'string') throw chatErrors.bad('Invalid narrow operator: the topic operand must be a string');
        out.push({ kind: 'topic', topic: t.operand, negated });
        break;
      case 'dm':
      case 'pm-with': {
        const ids = new Set(await r.userIds(t.operand));
        ids.add(r.selfId);
        out.push({ kind: 'dm', key: dmKey([...ids]), negated });
        break;
      }
      case 'dm-including':
        out.push({ kind: 'dm-including', userId: await r.userId(t.operand), negated });
        break;
      case 'sender':
        out.push({ kind: 'sender', userId: t.operand === 'me' ? r.selfId : await r.userId(t.operand), negated });
        break;
      case 'search': {
        if (negated) throw chatErrors.bad('Invalid narrow operator: a search cannot be negated (no index can answer "every message without these words")');
        if (typeof t.operand !== 'string') throw chatErrors.bad('Invalid narrow operator: the search operand must be a string');
        const words = t.operand.toLowerCase().split(/\s+/).filter(Boolean).slice(0, 10);
        if (words.some((w) => [...w].length < 2)) throw chatErrors.bad('Invalid narrow operator: search for words of at least 2 characters');
        if (words.length) out.push({ kind: 'search', words });
        break;
      }
      case 'is': {
        const what = t.operand === 'private' ? 'dm' : t.operand;
        if (!['mentioned', 'unread', 'starred', 'dm', 'resolved', 'read'].includes(what as string)) {
          throw chatErrors.bad(`Invalid narrow operator: unsupported "is" operand ${JSON.stringify(t.operand)} (supported: mentioned, unread, starred, dm, resolved)`);
        }
        out.push({ kind: 'is', what: what as 'mentioned', negated });
        break;
      }
      case 'id':
      case 'near': {
        const id = typeof t.operand === 'string' && /^\d{1,10}$/.test(t.operand) ? Number(t.operand) : t.operand;
        if (!Number.isSafeInteger(id)) throw chatErrors.bad(`Invalid narrow operator: the ${t.operator} operand must be a message ID`);
        if (t.operator === 'id') out.push({ kind: 'id', id: id as number, negated });
        else near = id as number;
        break;
      }
      default:
        throw chatErrors.bad(`Invalid narrow operator: ${t.operator} is not supported by this server`);
    }
  }
  return { terms: out, near };
}

/** The key of a direct message conversation: its participants' ids, sorted, comma-separated. */
export function dmKey(ids: number[]): string {
  return [...new Set(ids)].sort((a, b) => a - b).join(',');
}

const likeEscape = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/** The SQL condition of one term, over `m` (chat_messages) and `um` (the caller's chat_user_messages, possibly absent). */
export function termSql(t: Term): RawBuilder<boolean> {
  const not = (cond: RawBuilder<boolean>, negated: boolean) => (negated ? sql<boolean>`not coalesce(${cond}, false)` : cond);
  switch (t.kind) {
    case 'stream':
      return not(sql<boolean>`m.stream_id = ${t.streamId}`, t.negated);
    case 'topic':
      return not(sql<boolean>`(m.type = 'stream' and lower(m.topic) = ${t.topic.toLowerCase()})`, t.negated);
    case 'dm':
      return not(sql<boolean>`m.dm_key = ${t.key}`, t.negated);
    case 'dm-including':
      return not(sql<boolean>`(m.type = 'private' and (',' || m.dm_key || ',') like ${`%,${t.userId},%`})`, t.negated);
    case 'sender':
      return not(sql<boolean>`m.sender_id = ${t.userId}`, t.negated);
    case 'search':
      return sql.join(
        t.words.map((w) => sql<boolean>`(lower(m.content) like ${`%${likeEscape(w)}%`} escape '\\' or lower(m.topic) like ${`%${likeEscape(w)}%`} escape '\\')`),
        sql` and `,
      ) as RawBuilder<boolean>;
    case 'is':
      switch (t.what) {
        case 'mentioned':
          return not(sql<boolean>`coalesce(um.flags & ${ANY_MENTION}, 0) <> 0`, t.negated);
        case 'unread':
          return not(sql<boolean>`(um.user_id is not null and um.flags & ${FLAG.read} = 0)`, t.negated);
        case 'read':
          return not(sql<boolean>`(um.user_id is null or um.flags & ${FLAG.read} <> 0)`, t.negated);
        case 'starred':
          return not(sql<boolean>`coalesce(um.flags & ${FLAG.starred}, 0) <> 0`, t.negated);
        case 'dm':
          return not(sql<boolean>`m.type = 'private'`, t.negated);
        case 'resolved':
          return not(sql<boolean>`(m.type = 'stream' and m.topic like '✔ %')`, t.negated);
      }
      break;
    case 'id':
      // Ids are int4: one beyond them (dbId's 0) is no message, as Zulip answers it, not a database error.
      return not(sql<boolean>`m.id = ${dbId(t.id)}`, t.negated);
  }
  throw new Error('unreachable');
}

/** A message as the in-memory matcher sees it (for narrowed event queues). */
export interface MatchableMessage {
  type: 'stream' | 'private';
  stream_id?: number;
  topic: string;
  dm_key: string | null;
  sender_id: number;
  content: string;
  id: number;
}

/** Whether a new message matches a narrow, for the terms an event queue can judge alone. */
export function matches(terms: Term[], m: MatchableMessage, flags: string[]): boolean {
  return terms.every((t) => {
    let hit: boolean;
    switch (t.kind) {
      case 'stream':
        hit = m.stream_id === t.streamId;
        break;
      case 'topic':
        hit = m.type === 'stream' && m.topic.toLowerCase() === t.topic.toLowerCase();
        break;
      case 'dm':
        hit = m.dm_key === t.key;
        break;
      case 'dm-including':
        hit = m.type === 'private' && (m.dm_key ?? '').split(',').includes(String(t.userId));
        break;
      case 'sender':
        hit = m.sender_id === t.userId;
        break;
      case 'search':
        return t.words.every((w) => m.content.toLowerCase().includes(w) || m.topic.toLowerCase().includes(w));
      case 'is':
        hit =
          t.what === 'dm' ? m.type === 'private'
          : t.what === 'resolved' ? m.topic.startsWith('✔ ')
          : t.what === 'mentioned' ? flags.some((f) => f.endsWith('mentioned'))
          : t.what === 'unread' ? !flags.includes('read')
          : t.what === 'read' ? flags.includes('read')
          : flags.includes('starred');
        break;
      case 'id':
        hit = m.id === t.id;
        break;
    }
    return t.negated ? !hit : hit;
  });
}
