import { resolve } from 'node:path'
import type { Argv } from 'yargs'
import type { Mode, SessionFaultsOptions, SessionOptions } from '../../engine/index.ts'
import { faultVerdictError, formatFaultVerdict, formatSummary, loadSessionFaults, SESSION_OPTIONS } from '../../engine/index.ts'
import { FAULTS_OPTIONS, rerunCommand, seedLine } from '../../faults/index.ts'
import {
  DEFAULT_PROXY_PORT,
  limitsFromFlags,
  PROXY_LIMITS,
  PROXY_OPTIONS,
  type ProxyRunResult,
  runProxySession,
  type SessionRefusals,
  UPSTREAM_OPTIONS,
  type UpstreamOptions,
} from '../../proxy/index.ts'
import type { TraceStore } from '../../store/index.ts'
import { ErrorCodes, IDENTITY_OPTIONS, optionsFromFlags, ToolReplayError } from '../../trace/index.ts'
import { declareOptions } from '../declared-options.ts'
import { EXIT_CODES, TOOL_EXIT_MIN } from '../exit-codes.ts'
import { storeDir, withStore } from '../open-store.ts'
import type { Io } from '../output.ts'
import { redactionFromArgs, redactionOptions } from '../redaction-flags.ts'
import { sealedFromArgs, sealedHint, sealedOptions } from '../sealed-flags.ts'
import type { Args, CommandModule } from './command.ts'

/** How Tool Replay reaches upstreams: the flags of every command that sends requests live (record, replay, serve, drift). */
export function upstreamOptions(y: Argv): Argv {
  return declareOptions(y, UPSTREAM_OPTIONS)
}

/** Options every proxy-running command shares (record, replay, serve), each from its one declaration. */
export function proxyOptions(y: Argv): Argv {
  declareOptions(upstreamOptions(redactionOptions(y)), SESSION_OPTIONS, ['trace', 'durability', 'maxBodyBytes'])
  declareOptions(y, PROXY_OPTIONS)
  declareOptions(y, IDENTITY_OPTIONS)
  declareOptions(y, FAULTS_OPTIONS, ['faults', 'faultsSeed'])
  return declareOptions(y, PROXY_LIMITS)
}

/** Reads --faults and --seed before anything opens: a bad file must not start a run. */
export async function faultsFromArgs(args: Args): Promise<SessionFaultsOptions | undefined> {
  const { faults, faultsSeed: seed } = optionsFromFlags(FAULTS_OPTIONS, args)
  if (faults === undefined || faults === '') {
    if (seed !== undefined) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, '--seed is the seed of a faults file: add --faults FILE, or drop --seed.')
    return undefined
  }
  return loadSessionFaults(resolve(faults), { env: process.env, ...(seed !== undefined ? { seed } : {}) })
}

/** The command after `--` (yargs leaves it in `_` after the command name). */
export function commandArgv(args: Args): string[] {
  const rest = args['--'] ?? args._.slice(1)
  return rest.map(String)
}

/** Upstream options from the shared flags (--upstream-ca read, --resolve parsed). */
export function upstreamFromArgs(args: Args): UpstreamOptions {
  return optionsFromFlags(UPSTREAM_OPTIONS, args)
}

/** Runs one proxy session for a command module and maps the outcome to an exit code. */
export async function runProxyCommand(
  args: Args,
  io: Io,
  session: Omit<SessionOptions, 'store'>,
  opts: { strict: boolean; control: boolean; sessionsOnly?: boolean; createStore?: boolean; source?: { store: TraceStore; dir: string } },
): Promise<number> {
  const command = commandArgv(args)
  // `replay --trace-file`: a memory store and a scratch folder for the CA, the user's store never opened.
  const dir = opts.source?.dir ?? storeDir({ store: args.store })
  // Every flag is checked before the store opens: a bad flag must not touch any trace.
  const { port, ...proxy } = optionsFromFlags(PROXY_OPTIONS, args)
  const limits = limitsFromFlags(args)
  const { maxBodyBytes, durability } = optionsFromFlags(SESSION_OPTIONS, args)
  const upstream = upstreamFromArgs(args)
  const sealed = sealedFromArgs(args)
  const identity = optionsFromFlags(IDENTITY_OPTIONS, args)
  // --max-body-bytes is the session's limit (what it holds whole to redact) and so the proxy's (runProxySession).
  session = { ...session, identity, redaction: await redactionFromArgs(args), durability, maxBodyBytes }
  const faults = await faultsFromArgs(args)
  // Printed at the start and again on any failure, so a failing chaos run can always be rerun exactly.
  const rerun = faults && rerunCommand(['tr-proxy', ...(args.rawArgv ?? [])], faults.seed)
  const seedText = faults && seedLine(faults.seed, faults.seedSource, rerun)
  // Strict replay injects nothing: its seed is the replayed trace's, printed with the verdict at the end.
  if (seedText && !args.json && session.mode !== 'replay') io.err(seedText)
  // `tr-proxy replay` reads recordings: a --store naming no store (a typo) is TR_STORE_NOT_FOUND, never a new empty
  // one (createStore: false). `serve` may start on an empty store: its sessions record into it.
  const run = async (store: TraceStore) => {
    const result = await runProxySession({
      ...proxy,
      store,
      storeDir: dir,
      session: faults ? { ...session, faults } : session,
      ...(opts.sessionsOnly ? { sessionsOnly: true } : {}),
      port: port ?? (command.length > 0 ? 0 : DEFAULT_PROXY_PORT),
      upstream,
      limits,
      ...(command.length > 0 ? { command } : {}),
      ...(sealed ? { sealed } : {}),
      control: opts.control,
      log: (line) => io.err(line),
    })
    return reportProxyRun(result, { args, io, mode: session.mode, strict: opts.strict, command, rerun, seedText })
  }
  if (opts.source) return run(opts.source.store)
  return withStore({ store: args.store }, run, { create: opts.createStore !== false })
}

/** What a proxy run's outcome prints (text or JSON) and the exit code it maps to. */
function reportProxyRun(
  result: ProxyRunResult,
  o: { args: Args; io: Io; mode: Mode; strict: boolean; command: string[]; rerun: string | undefined; seedText: string | undefined },
): number {
  const { args, io, rerun, seedText } = o
  const s = result.summary
  // Named sessions left open when the proxy stopped count too (their summaries were logged as they closed).
  const replays = [...(s ? [s] : []), ...result.sessions.map((n) => n.summary)].filter((x) => x.mode === 'replay')
  // A request naming a session never opened here failed in the app even if the app swallowed it (a typo, a
  // misconfigured client): it fails the run. Unnamed requests and ones naming a closed session are reported.
  const refusals = result.sessionRefusals
  const refusedCount = refusals.unnamed + refusals.neverOpened + refusals.closed
  const ok = (s?.ok ?? true) && result.sessions.every((n) => n.summary.ok && n.error === undefined) && refusals.neverOpened === 0
  const verdict = result.faults
  const faultError = verdict && faultVerdictError(verdict, rerun)
  let exit = result.command?.code ?? 0
  // The replay contract outranks a fault rule that never fired, which outranks a broken contract, which
  // outranks the command's own code: each usually explains the next.
  if (o.strict && replays.some((r) => !r.ok)) exit = EXIT_CODES[ErrorCodes.REPLAY_INCOMPLETE]
  else if (refusals.neverOpened > 0) exit = EXIT_CODES[ErrorCodes.SESSION_UNKNOWN]
  else if (faultError) exit = EXIT_CODES[faultError.code]
  if (args.json) {
    const faultsJson = verdict && { seed: verdict.seed, rerun, ok: verdict.ok, coverage: verdict.coverage, contracts: verdict.contracts ?? null }
    const sessions = result.sessions.map((n) => ({
      name: n.name,
      summary: n.summary,
      ...(n.error ? { error: String((n.error as Error)?.message ?? n.error) } : {}),
    }))
    io.out(
      JSON.stringify({
        ok: ok && !faultError,
        summary: s ?? null,
        ...(sessions.length > 0 ? { sessions } : {}),
        ...(refusedCount > 0 ? { sessionRefusals: refusals } : {}),
        ...(faultsJson ? { faults: faultsJson } : {}),
        exitCode: result.command?.code ?? null,
      }),
    )
    return exit
  }
  if (s) io.err(formatSummary(s))
  if (refusedCount > 0) io.err(formatSessionRefusals(refusals))
  if (verdict) io.err(formatFaultVerdict(verdict))
  const hint = sealedHint(args, o.mode, o.strict, o.command)
  if (hint) io.err(hint)
  if (faultError && exit === EXIT_CODES[faultError.code]) io.err(`error ${faultError.code}: ${faultError.message}`)
  // The seed again at the end of a failed run (the fault error already names it), and for replay the trace's.
  if (o.mode === 'replay' && verdict) io.err(verdict.seedLine)
  else if (seedText && exit !== 0 && !faultError) io.err(seedText)
  if (exit !== (result.command?.code ?? 0)) return exit
  const code = exit
  // Tool Replay's own codes start at 64; say whose code it is when a command's could be mistaken for one.
  if (code >= TOOL_EXIT_MIN && !args.json) io.err(`exit ${code} is the wrapped command's own (Tool Replay saw no problem).`)
  return code
}

/** `tr-proxy record [--mode record|update|passthrough] [-- cmd ...]`: record through the proxy. */
export const recordCommand: CommandModule = {
  command: 'record',
  describe: 'Run the proxy recording live exchanges into a trace; with `-- cmd ...` run that command through it, else serve until Ctrl-C',
  builder: (y) =>
    declareOptions(sealedOptions(proxyOptions(y)), SESSION_OPTIONS, ['mode', 'keepUnused'], {
      mode: { choices: ['record', 'update', 'passthrough'], default: 'record' },
    }),
  run: async (args, io) => {
    const mode = String(args.mode ?? 'record') as Mode
    if (args['keep-unused'] && mode !== 'update') {
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, '--keep-unused only applies to --mode update (it keeps recordings an update run did not request).')
    }
    return runProxyCommand(
      args,
      io,
      { mode, trace: String(args.trace), ...(args['keep-unused'] ? { keepUnused: true } : {}) },
      { strict: false, control: false },
    )
  },
}

/** The end report of requests refused for their session: counts by why, then the first few. */
function formatSessionRefusals(r: SessionRefusals): string {
  const lines = [
    `${ErrorCodes.SESSION_UNKNOWN}: ${r.neverOpened + r.unnamed + r.closed} request(s) refused for their session: ${r.neverOpened} named a session never opened here (this fails the run: fix the name, or open it first), ${r.closed} a session already closed, ${r.unnamed} named none.`,
  ]
  for (const e of r.examples) lines.push(`  ${e.reason.padEnd(12)} ${e.session === null ? '(none)' : `"${e.session}"`} ${e.method} ${e.url}`)
  return lines.join('\n')
}
