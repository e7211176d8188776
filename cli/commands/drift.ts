import { existsSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import {
  driftReport,
  driftUpdatedTrace,
  formatDriftText,
  type LiveAnswers,
  type McpDriftOptions,
  McpHttpSessions,
  mcpStdioReplies,
  type PlannedExchange,
  planDrift,
  type RedactionOptions,
  type TraceDriftReport,
  traceDriftReport,
} from '../../engine/index.ts'
import { resendMcpStdio } from '../../mcp/index.ts'
import { resendLive, type UpstreamOptions } from '../../proxy/index.ts'
import { type TraceStore, writeTraceFile } from '../../store/index.ts'
import { assertTraceName, ErrorCodes, type Exchange, maskedCommandLine, parseCommandLine, ToolReplayError, type Trace } from '../../trace/index.ts'
import type { Io } from '../output.ts'
import { redactionFromArgs, redactionOptions } from '../redaction-flags.ts'
import { isTraceFileArg, withTraceLoader } from '../trace-args.ts'
import type { Args, CommandModule } from './command.ts'
import { DIFF_EXIT_DIFFERENT } from './diff.ts'
import { upstreamFromArgs, upstreamOptions } from './record.ts'

/** Exit code of a drift run that found no drift but could not reach a server: as TR_UPSTREAM_FAILED (cli/exit-codes.ts). */
export const DRIFT_EXIT_UNREACHABLE = 74

/** `tr-proxy drift TRACE...`: re-send a trace's requests live and compare the answers with the recording in shape. */
export const driftCommand: CommandModule = {
  command: 'drift <traces..>',
  describe:
    'Re-send the requests of traces live (safe methods; --unsafe, --model-calls for the rest) and report where the answers changed shape: status, content type, JSON fields (paths), event types, tool calls',
  builder: (y) =>
    upstreamOptions(redactionOptions(y))
      .positional('traces', { type: 'string', array: true, describe: 'Traces: names in the store or .json trace files' })
      .option('unsafe', {
        type: 'boolean',
        default: false,
        describe: 'Also re-send requests whose method is not safe (POST, PUT, PATCH, DELETE: they may change something); listed before anything is sent',
      })
      .option('model-calls', { type: 'boolean', default: false, describe: 'Also re-send model calls (they cost tokens); their count is printed first' })
      .option('mcp-spawn', {
        type: 'boolean',
        default: false,
        describe:
          'Re-spawn MCP stdio servers from their recorded commands (listed before anything runs) to re-send their messages; a command recorded with masked values is not run',
      })
      .option('mcp-command', {
        type: 'string',
        array: true,
        describe:
          'NAME=ENV_VAR: run MCP stdio server NAME with the command line in $ENV_VAR (a JSON array, or words; for a command recorded with masked values; repeatable)',
      })
      .option('mcp-read-only', {
        type: 'string',
        array: true,
        describe: 'MCP tools that only read (re-sent without --unsafe), beside those the server marks readOnlyHint; * matches any characters (repeatable)',
      })
      .option('fill-header', {
        type: 'string',
        array: true,
        describe: 'NAME=ENV_VAR: where the recording has header NAME redacted, send the value of $ENV_VAR (repeatable; redacted again before anything is kept)',
      })
      .option('update', { type: 'boolean', default: false, describe: 'Write the live answers as a new trace beside the recorded one (NAME.drift) for review' })
      .option('update-as', { type: 'string', describe: 'With --update and one trace: the new trace name (a file path when the trace is a file)' })
      .option('force', { type: 'boolean', default: false, describe: 'With --update: replace an existing trace of the new name' })
      .option('format', { choices: ['text', 'json'] as const, default: 'text', describe: 'Output: text, or versioned JSON (as --json)' })
      .option('exit-code', {
        type: 'boolean',
        default: true,
        describe: `Exit ${DIFF_EXIT_DIFFERENT} when anything drifted or could not be re-sent (as diff --exit-code), else ${DRIFT_EXIT_UNREACHABLE} when a server could not be reached (offline: not drift); --no-exit-code exits 0 either way`,
      }),
  run: async (args, io) => {
    const names = ((args.traces as unknown[] | undefined) ?? []).map(String)
    if (typeof args['update-as'] === 'string' && (names.length !== 1 || !args.update)) {
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, '--update-as names the new trace of one trace: give one trace and --update.')
    }
    if (args.force && !args.update)
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, '--force replaces the trace --update writes: add --update, or drop --force.')
    // Every flag is checked before anything is loaded or sent.
    const fill = fillFromArgs(args)
    const redaction = await redactionFromArgs(args)
    const upstream = upstreamFromArgs(args)
    const options = { unsafe: Boolean(args.unsafe), modelCalls: Boolean(args['model-calls']), fill, mcp: mcpFromArgs(args) }
    return withTraceLoader({ store: args.store, writable: Boolean(args.update) }, names, async (load, store) => {
      const traces: Trace[] = []
      for (const name of names) traces.push(await load(name))
      const targets = args.update ? await Promise.all(traces.map((t, i) => updateTarget(args, names[i] as string, t, store))) : []
      const plans = traces.map((t) => planDrift(t, options))
      announce(io, names, plans)
      const reports: TraceDriftReport[] = []
      for (const [i, trace] of traces.entries()) {
        const live = await resend(trace, plans[i] as PlannedExchange[], upstream, redaction)
        const report = traceDriftReport(trace, plans[i] as PlannedExchange[], live)
        const target = targets[i]
        if (target) report.updated = await writeUpdate(target, trace, live, store, Boolean(args.force))
        reports.push(report)
      }
      const report = driftReport(reports)
      io.out(args.format === 'json' || args.json ? JSON.stringify(report, null, 2) : formatDriftText(report))
      if (args['exit-code'] === false) return 0
      return report.drift ? DIFF_EXIT_DIFFERENT : report.unreachable ? DRIFT_EXIT_UNREACHABLE : 0
    })
  },
}

/** `--fill-header NAME=ENV_VAR` values as lower-case name → value; a missing variable fails before anything is sent. */
function fillFromArgs(args: Args): Map<string, string> {
  const fill = new Map<string, string>()
  for (const spec of ((args['fill-header'] as unknown[] | undefined) ?? []).map(String)) {
    const m = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+)=([A-Za-z_][A-Za-z0-9_]*)$/.exec(spec)
    if (!m)
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid --fill-header "${spec}": expected NAME=ENV_VAR, e.g. --fill-header authorization=API_AUTH.`)
    const [, name, variable] = m as unknown as [string, string, string]
    const value = process.env[variable]
    if (value === undefined || value === '') {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        `--fill-header ${name}=${variable}: $${variable} is not set. Export it (the value is never printed or kept).`,
      )
    }
    fill.set(name.toLowerCase(), value)
  }
  return fill
}

/** The MCP flags: --mcp-spawn, --mcp-command NAME=ENV_VAR (read now: a missing variable fails before anything runs), --mcp-read-only. */
function mcpFromArgs(args: Args): McpDriftOptions {
  const commands = new Map<string, readonly string[]>()
  for (const spec of ((args['mcp-command'] as unknown[] | undefined) ?? []).map(String)) {
    const m = /^([a-z0-9][a-z0-9.-]*)=([A-Za-z_][A-Za-z0-9_]*)$/.exec(spec)
    if (!m)
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        `Invalid --mcp-command "${spec}": expected NAME=ENV_VAR, e.g. --mcp-command weather=WEATHER_MCP_COMMAND.`,
      )
    const [, name, variable] = m as unknown as [string, string, string]
    const value = process.env[variable]?.trim()
    let argv: unknown = value?.startsWith('[') ? tryJson(value) : value ? parseCommandLine(value) : undefined
    if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === 'string')) argv = undefined
    if (!argv) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        `--mcp-command ${name}=${variable}: $${variable} must hold the server's command line, as a JSON array (["node","server.js","--key","..."]) or words. Export it (the value is never printed or kept).`,
      )
    }
    commands.set(name, argv as string[])
  }
  const readOnlyTools = ((args['mcp-read-only'] as unknown[] | undefined) ?? []).map(String)
  return { spawn: Boolean(args['mcp-spawn']), commands, readOnlyTools }
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/**
 * Says what will go out before anything does: the MCP servers started from recorded commands, the count of model
 * calls, and every request of an unsafe method.
 */
function announce(io: Io, names: string[], plans: PlannedExchange[][]): void {
  const spawned = new Map<string, string>()
  // Masked as it is in a trace: a command given with --mcp-command holds what the recording masked.
  for (const plan of plans)
    for (const p of plan) if (p.send && p.mcp?.transport === 'stdio' && !spawned.has(p.mcp.server)) spawned.set(p.mcp.server, maskedCommandLine(p.mcp.command))
  for (const [server, command] of spawned) io.err(`drift: re-spawning MCP server "${server}": ${command}`)
  const sent = plans.flatMap((plan, i) => plan.filter((p) => p.send).map((p) => ({ trace: names[i] as string, label: p.label, kind: p.kind })))
  const models = sent.filter((p) => p.kind === 'model')
  const unsafe = sent.filter((p) => p.kind === 'unsafe')
  if (models.length > 0) io.err(`drift: re-sending ${models.length} model call(s) live (--model-calls); each one costs tokens.`)
  if (unsafe.length > 0) {
    io.err(`drift: re-sending ${unsafe.length} request(s) whose method is not safe (--unsafe):`)
    for (const p of unsafe) io.err(`  ${p.trace}: ${p.label}`)
  }
  io.err(`drift: re-sending ${sent.length} request(s) live, one at a time.`)
}

/**
 * Re-sends the planned requests of one trace and pairs each seq with its live answer: HTTP ones live (MCP ones in
 * fresh sessions), MCP stdio ones to their re-spawned servers, one server after the other.
 */
async function resend(trace: Trace, plan: PlannedExchange[], upstream: UpstreamOptions, redaction: RedactionOptions): Promise<LiveAnswers> {
  const toSend = plan.flatMap((p) => (p.send ? [p] : []))
  const out = new Map<number, { trace: Trace; exchange: Exchange } | { error: ToolReplayError }>()
  const http = toSend.filter((p) => p.mcp?.transport !== 'stdio')
  if (http.length > 0) {
    const sessions = new McpHttpSessions()
    const result = await resendLive(
      http.map((p) => p.request),
      {
        trace: 'drift-live',
        upstream,
        redaction,
        labels: { driftOf: trace.meta.name },
        prepare: (i, request) => {
          const mcp = http[i]?.mcp
          return mcp?.transport === 'http' ? sessions.prepare(mcp, request) : request
        },
        onHead: (i, head) => {
          const mcp = http[i]?.mcp
          if (mcp?.transport === 'http') sessions.answered(mcp, head)
        },
      },
    )
    http.forEach((p, i) => {
      const answer = result.answers[i]
      if (answer) out.set(p.seq, 'exchange' in answer ? { trace: result.trace, exchange: answer.exchange } : answer)
    })
  }
  const servers = new Map<string, { command: readonly string[]; sends: Array<Extract<PlannedExchange, { send: true }>> }>()
  for (const p of toSend) {
    if (p.mcp?.transport !== 'stdio') continue
    const group = servers.get(p.mcp.server) ?? { command: p.mcp.command, sends: [] }
    group.sends.push(p)
    servers.set(p.mcp.server, group)
  }
  for (const [server, group] of servers) {
    const result = await resendMcpStdio({
      trace: 'drift-live',
      server,
      command: group.command,
      messages: group.sends.map((p) => (p.mcp?.transport === 'stdio' ? p.mcp.message : {})),
      replies: mcpStdioReplies(trace, server),
      redaction,
    })
    group.sends.forEach((p, i) => {
      const answer = result.answers[i]
      if (answer) out.set(p.seq, 'exchange' in answer ? { trace: result.trace, exchange: answer.exchange } : answer)
    })
  }
  return out
}

/** Where `--update` writes: a trace in the store, or a trace file. */
type UpdateTarget = { kind: 'store'; name: string } | { kind: 'file'; file: string; name: string }

/** Decides where `--update` writes, before anything is sent: a name that exists fails now, not after the re-send. */
async function updateTarget(args: Args, arg: string, recorded: Trace, store: TraceStore | undefined): Promise<UpdateTarget> {
  const given = typeof args['update-as'] === 'string' ? args['update-as'] : undefined
  const force = Boolean(args.force)
  if (isTraceFileArg(arg)) {
    const source = resolve(arg)
    const file = given ? resolve(given) : join(dirname(source), basename(source).replace(/(\.trace)?\.json$/, '.drift$1.json'))
    if (file === source) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `--update would overwrite ${source}, the recorded trace: name another file.`)
    const name = basename(file).replace(/(\.trace)?\.json$/, '')
    assertTraceName(name, 'new trace name')
    if (!force && existsSync(file))
      throw new ToolReplayError(ErrorCodes.TRACE_EXISTS, `${file} exists: pass --force to replace it, or --update-as another file.`)
    return { kind: 'file', file, name }
  }
  const name = given ?? `${recorded.meta.name}.drift`
  assertTraceName(name, '--update-as trace name')
  if (name === recorded.meta.name) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `--update-as "${name}" is the recorded trace: name another trace.`)
  if (!force && (await (store as TraceStore).hasTrace(name))) {
    throw new ToolReplayError(ErrorCodes.TRACE_EXISTS, `Trace "${name}" exists: pass --force to replace it, or --update-as another name.`)
  }
  return { kind: 'store', name }
}

/** Writes the live answers as a new trace beside the recorded one; returns where. The recorded trace is never touched. */
async function writeUpdate(target: UpdateTarget, recorded: Trace, live: LiveAnswers, store: TraceStore | undefined, force: boolean): Promise<string> {
  const answered = new Map([...live].flatMap(([seq, a]) => ('exchange' in a ? [[seq, a] as const] : [])))
  const trace = driftUpdatedTrace(recorded, answered, target.name)
  if (target.kind === 'file') {
    await writeTraceFile(target.file, trace)
    return target.file
  }
  await (store as TraceStore).putTrace(trace, { overwrite: force })
  return `trace "${target.name}"`
}
