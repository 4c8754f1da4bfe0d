/**
 * The whole run stack for end-to-end tests: the console and the model proxy on a fresh database
 * (`testApp`), a scripted model behind the proxy, the credential gateway and the worker (its sandbox
 * host with the real `local` provider). Tests give it a script, build a team with `makeTeam`, give
 * tasks and wait on runs through the public API, as a person would.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { RunningComponent } from '../../src/components.ts';
import { startGateway, type RunningGateway } from '../../src/gateway/gateway.component.ts';
import { Registry } from '../../src/metrics.ts';
import { createLocalProvider } from '../../src/runtime/sandboxes/providers/local.ts';
import { findProgram } from '../../src/runtime/sandboxes/system.ts';
import { workerComponent } from '../../src/runtime/worker.component.ts';
import { loadShared } from '../../src/services.ts';
import { makeAgent } from '../factories.ts';
import { startScriptedModel, type ScriptedAnswer, type ScriptedModel, type ScriptedRequest } from '../fakes/scripted-model.ts';
import { captureLogger, testApp, uniq, waitFor as waitUntil, type TestApp } from '../harness.ts';

/** Why the stack cannot run on this machine, or false when it can (for `describe(..., { skip })`). */
export const stackSkip: string | false =
  process.getuid?.() === 0 && ['bwrap', 'nft', 'ip', 'nsenter', 'setpriv'].every((p) => findProgram(p) !== null)
    ? false
    : 'needs root, bubblewrap, nftables, iproute2 and util-linux (the local sandbox provider)';

export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '0.0.0.0', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** Host processes whose command line is exactly `argv` (a sandbox's processes are visible from the host). */
export function processesWith(argv: string[]): number[] {
  const want = `${argv.join('\0')}\0`;
  const out: number[] = [];
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8') === want) out.push(Number(pid));
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

/** The harness's waitFor, bounded generously: the stack's work takes minutes on a loaded CI machine. */
export const waitFor = <T>(what: string, probe: () => T | Promise<T>, ms = 180_000) => waitUntil(what, probe, ms);

/** The role a model request is for, from the system prompt the agent runtime writes. */
export const roleOf = (req: ScriptedRequest) => /You are the "([a-z0-9._-]+)" role/.exec(req.system)?.[1] ?? '?';
/** The text of the request's last message (the newest user message or tool result). */
export const lastText = (req: ScriptedRequest) => String(req.last?.content ?? '');

/** The scenario a conversation belongs to (a test's runs told apart by their task's `SCENARIO <name>`), or `?`. */
export function scenarioOf(req: ScriptedRequest): string {
  for (const m of req.body.messages) {
    const found = /SCENARIO (\w+)/.exec(typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? ''));
    if (found) return found[1]!;
  }
  return '?';
}

export interface RunPost {
  seq: number;
  kind: string;
  role: string | null;
  text: string;
  data?: Record<string, unknown> | null;
}

export interface StackOptions {
  /** Answers every model request the agents make. */
  script: (req: ScriptedRequest) => ScriptedAnswer | Promise<ScriptedAnswer>;
  /** Extra SERVICE_* settings. */
  config?: Record<string, string>;
  /** Start the worker (default true); a test that runs the worker elsewhere (a child process) says false. */
  worker?: boolean;
  /** Model price per million input tokens (default 1 USD). */
  inputUsdPerMtok?: number;
  /** The code-host app's clock (a fake code host's). */
  codeHostClock?: () => number;
}

export interface TeamSpec {
  /** role -> the agent version's tools (and optional system prompt). The first role is the lead. */
  roles: Record<string, { tools: string[]; system_prompt?: string; /** Extra fields of the template's role (max_iterations, confirmation_policy, memory, ...). */ role?: Record<string, unknown> }>;
  pipeline?: Record<string, string>;
  rework_rounds?: number;
  repo_url?: string | null;
  budget_usd_per_day?: number;
  /** Extra template fields (memory, ...). */
  template?: Record<string, unknown>;
  /** Fields of the team's environment other than the `local` defaults (provider, image, ...). */
  environment?: Record<string, unknown>;
  /** The team's home (a chat room: `{surface: 'chat_a', room_id}`). */
  home?: Record<string, unknown>;
}

export interface Stack {
  t: TestApp;
  model: ScriptedModel;
  gateway: RunningGateway;
  worker: RunningComponent | null;
  sandboxDir: string;
  logLines: string[];
  /** SERVICE_* settings the stack was started with, for a worker started in another process. */
  env: Record<string, string>;
  /** Creates an environment, one agent per role, a template and a team; answers the team's name. */
  makeTeam(spec: TeamSpec): Promise<string>;
  /** `POST /teams/{name}/tasks`; answers the run's id. */
  giveTask(team: string, text: string): Promise<string>;
  run(id: string): Promise<Record<string, any>>;
  /** Waits until the run is in `state` (failing fast, with its reason, when it fails unexpectedly). */
  waitForState(id: string, state: string): Promise<Record<string, any>>;
  posts(id: string): Promise<RunPost[]>;
  stop(): Promise<void>;
}

export async function startStack(opts: StackOptions): Promise<Stack> {
  const model = await startScriptedModel(opts.script);
  const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-e2e-'));
  const gatewayPort = await freePort();
  const subnet = `10.${200 + crypto.randomInt(50)}.${crypto.randomInt(256)}.0/24`;
  const env: Record<string, string> = {
    SERVICE_MODELS: JSON.stringify([{ alias: 'fast', model: 'scripted', api: 'openai', base_url: model.baseUrl, api_key_secret: null, input_usd_per_mtok: opts.inputUsdPerMtok ?? 1, output_usd_per_mtok: 2, max_output_tokens: 1000, context_window: 100_000 }]),
    SERVICE_GATEWAY_PORT: String(gatewayPort),
    SERVICE_SANDBOX_DIR: sandboxDir,
    SERVICE_SANDBOX_SUBNET: subnet,
    SERVICE_SANDBOX_HOST_DEAD_AFTER: '30',
    // Every team gets its own environment and sandboxes; local sandboxes share the machine's few cores.
    SERVICE_SANDBOX_VCPUS: '32',
    ...opts.config,
  };
  const t = await testApp({ modelProxy: true, config: env, codeHostClock: opts.codeHostClock });
  // Every line a test may look for is kept; a bench asks for less (a production level) with SERVICE_LOG_LEVEL.
  const captured = captureLogger(opts.config?.SERVICE_LOG_LEVEL ?? 'debug');
  const shared = loadShared(t.config);
  const ctx = { config: t.config, db: t.db, logger: captured.logger, metrics: new Registry(), ...shared, services: t.services };
  const gateway = await startGateway({ ...ctx, listen: { host: '0.0.0.0', port: gatewayPort } });
  const worker = opts.worker === false ? null : await workerComponent.start(ctx);

  const api = async (method: string, url: string, body?: unknown) => t.request({ method, url, token: t.adminToken, body });

  const stack: Stack = {
    t,
    model,
    gateway,
    worker,
    sandboxDir,
    logLines: captured.lines,
    env,
    async makeTeam(spec) {
      const envName = uniq('env');
      const e = await api('POST', '/api/v1/environments', { name: envName, provider: 'local', profile: 'small', vcpus: 1, memory_mib: 512, disk_gib: 1, idle_after_seconds: 600, deep_sleep_after_seconds: 3600, ...spec.environment });
      assert.equal(e.status, 201, e.text);
      const roles: Record<string, unknown> = {};
      for (const [role, r] of Object.entries(spec.roles)) {
        const agent = await makeAgent(t, { version: { system_prompt: r.system_prompt ?? `You are good at being the ${role}.`, tools: r.tools } });
        roles[role] = { agent: agent.name, model: 'fast', vm: envName, ...r.role };
      }
      const lead = Object.keys(spec.roles)[0];
      const tpl = await api('POST', '/api/v1/team-templates', {
        name: uniq('tpl'),
        lead,
        roles,
        sleep: {},
        idle_after_seconds: 600,
        deep_sleep_after_seconds: 3600,
        budget_usd_per_day: spec.budget_usd_per_day ?? 10,
        pipeline: spec.pipeline ?? {},
        ...(spec.rework_rounds !== undefined ? { rework_rounds: spec.rework_rounds } : {}),
        ...spec.template,
      });
      assert.equal(tpl.status, 201, tpl.text);
      const team = await api('POST', '/api/v1/teams', { name: uniq('team'), template: { name: tpl.body.name, version: null }, ...(spec.repo_url ? { repo_url: spec.repo_url } : {}), ...(spec.home ? { home: spec.home } : {}) });
      assert.equal(team.status, 201, team.text);
      return team.body.name as string;
    },
    async giveTask(team, text) {
      const r = await api('POST', `/api/v1/teams/${team}/tasks`, { text });
      assert.equal(r.status, 202, r.text);
      return r.body.run_id as string;
    },
    async run(id) {
      const r = await api('GET', `/api/v1/runs/${id}`);
      assert.equal(r.status, 200, r.text);
      return r.body;
    },
    async waitForState(id, state) {
      return waitFor(`run ${id} to be ${state}`, async () => {
        const r = await stack.run(id);
        if (r.state === 'failed' && state !== 'failed') assert.fail(`the run failed: ${r.failure_reason}`);
        return r.state === state ? r : null;
      });
    },
    async posts(id) {
      const all: RunPost[] = [];
      for (;;) {
        const r = await api('GET', `/api/v1/runs/${id}/posts${all.length ? `?cursor=${all[all.length - 1].seq}` : ''}`);
        assert.equal(r.status, 200, r.text);
        all.push(...r.body.items);
        if (!r.body.items.length || !r.body.next_cursor) return all;
      }
    },
    async stop() {
      if (process.env.E2E_DEBUG) process.stderr.write(captured.lines.filter((l) => /"level":(30|40|50)/.test(l)).join(''));
      await worker?.stop();
      // Sandboxes outlive their worker by design (a restart finds them): a test's are destroyed here,
      // their processes, network and workspace volumes with them, before their folder goes.
      const local = createLocalProvider({ root: sandboxDir, gatewayPort: Number(env.SERVICE_GATEWAY_PORT), logger: captured.logger });
      for (const id of await local.list()) await local.destroy(id).catch((err) => process.stderr.write(`could not destroy sandbox ${id}: ${String(err)}\n`));
      await gateway.stop();
      await t.close();
      await model.close();
      fs.rmSync(sandboxDir, { recursive: true, force: true });
    },
  };
  return stack;
}

/**
 * The destination `codehost` through which a team's sandbox reaches a fake code host's git (HTTPS at
 * `<host>:<port>`): pushes to `crewhouse/*` only, with the gateway injecting an installation token.
 */
export async function addCodeHostDestination(t: TestApp, host: string, port: number): Promise<void> {
  const dest = await t.request({
    method: 'POST',
    url: '/api/v1/destinations',
    token: t.adminToken,
    body: {
      name: 'codehost',
      host: `${host}:${port}`,
      what: 'the fake code host',
      methods: [],
      paths: [],
      header_allowlist: ['git-protocol', 'accept', 'user-agent', 'content-type'],
      git_push_ref_globs: ['crewhouse/*'],
      inject_secret: 'code_host_installation_token',
      dev_only: true,
    },
  });
  assert.equal(dest.status, 201, dest.text);
}

/** A file of a run's workspace in the stack's sandboxes, '' until it exists. */
export function workspaceFile(stack: Stack, name: string): string {
  const files = fs.readdirSync(stack.sandboxDir, { recursive: true }) as string[];
  const f = files.find((x) => x.endsWith(`workspace${path.sep}${name}`));
  return f ? fs.readFileSync(path.join(stack.sandboxDir, f), 'utf8') : '';
}

/**
 * A run that wrote three lines to `file` with three shell calls, the second interrupted mid-way
 * (its runtime or its worker killed) and resumed: each call ran once, the interrupted one was
 * not run again and the run was told (a notice), and its posts are numbered without gaps.
 */
export async function assertResumedWithoutRepeats(stack: Stack, run: Record<string, any>, file: string): Promise<void> {
  assert.equal(workspaceFile(stack, file), 'one\ntwo\nthree\n', 'every tool ran once; the interrupted one was not run again');
  assert.match(run.tasks.at(-1).state, /done/);
  const posts = await stack.posts(run.id);
  posts.forEach((p, i) => assert.equal(p.seq, i + 1, 'posts are numbered without gaps'));
  const summary = posts.map((p) => `${p.kind}:${p.data?.tool ?? ''}:${p.data?.ok ?? ''}`);
  assert.deepEqual(summary, ['task::', 'working:shell:true', 'notice:shell:', 'working:shell:true', 'completed::'], JSON.stringify(posts.map((p) => [p.seq, p.kind, p.text.slice(0, 80)])));
  assert.match(posts[2]!.text, /shell was interrupted/);
}
