/**
 * Reads a faults file (JSON or YAML) strictly. Every problem is TR_INVALID_FAULTS naming the file, the
 * rule (by index and id) and the field, saying what is wrong and how to write it instead.
 */
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import {
  ErrorCodes,
  FAULT_DEFAULTS,
  FAULT_KINDS,
  type FaultKind,
  isExactNumber,
  parseJson,
  parseJsonPath,
  SERVER_ERROR_STATUSES,
  ToolReplayError,
} from '../trace/index.ts'
import {
  CONTRACT_KINDS,
  type ContractSpec,
  type DriftChange,
  type EffectRule,
  FAULT_ERROR_CODES,
  type FaultErrorCode,
  type FaultOptionsByKind,
  type FaultRule,
  type FaultsConfig,
  type LatencyDistribution,
  PROVIDER_SHAPES,
  type ProviderShape,
  type RuleFaultKind,
  type StreamPoint,
  type ValueRef,
} from './fault-rules.ts'
import { compileTarget, type Target, type TargetSpec, TargetSyntaxError } from './fault-target.ts'
import { describe, editDistance, plain } from './fault-values.ts'
import { WEBSOCKET_OPTION_KEYS, websocketFaultOptions } from './websocket-fault-options.ts'

/** Reads and validates a faults file; `.json` is read as JSON, anything else as YAML. */
export async function readFaultsFile(path: string): Promise<FaultsConfig> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_FAULTS,
      `Failed to read faults file ${path}: ${(err as Error).message}. Check the path (--faults or TOOL_REPLAY_FAULTS).`,
      {
        cause: err,
        details: { source: path },
      },
    )
  }
  return parseFaults(text, { source: path, format: path.endsWith('.json') ? 'json' : 'yaml' })
}

/** The `yaml` package, loaded the first time a YAML faults file is read (it is 72 modules every import would pay for). */
let yamlModule: typeof import('yaml') | undefined
function yaml(): typeof import('yaml') {
  yamlModule ??= createRequire(import.meta.url)('yaml') as typeof import('yaml')
  return yamlModule
}

/** Parses and validates faults-file text. YAML is a superset of JSON, so `yaml` reads either. */
export function parseFaults(text: string, options: { source?: string; format?: 'json' | 'yaml' } = {}): FaultsConfig {
  const source = options.source ?? '<faults>'
  let raw: unknown
  try {
    // intAsBigInt keeps a long integer seed exact; the validator turns other integers back into numbers.
    raw = options.format === 'json' ? parseJson(text) : yaml().parse(text, { intAsBigInt: true, uniqueKeys: true })
  } catch (err) {
    const where =
      options.format !== 'json' && err instanceof yaml().YAMLParseError && err.linePos ? ` at line ${err.linePos[0].line}, column ${err.linePos[0].col}` : ''
    const why = ((err as Error).message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '')
    throw new ToolReplayError(
      ErrorCodes.INVALID_FAULTS,
      `Faults file ${source} is not valid ${options.format === 'json' ? 'JSON' : 'YAML'}${where}: ${why}. Fix the syntax.`,
      {
        cause: err,
        details: { source },
      },
    )
  }
  return faultsFromObject(raw, source)
}

/** Validates a faults object given in code (`install({ faults: {...} })`). */
export function faultsFromObject(raw: unknown, source = '<inline faults>'): FaultsConfig {
  return new FaultsReader(source).config(raw)
}

const TOP_KEYS = ['seed', 'rules', 'effects', 'contracts']
const RULE_KEYS = ['id', 'target', 'fault', 'calls', 'first', 'probability', 'limit', 'window', 'quota', 'key', 'optional', 'options']
const RULE_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/
/** The fault kinds an MCP target takes. */
const MCP_KINDS: readonly FaultKind[] = ['tool_error', 'timeout', 'response_lost', 'latency', 'server_crash']
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

class FaultsReader {
  readonly #source: string
  constructor(source: string) {
    this.#source = source
  }

  fail(where: string, problem: string, fix: string, rule?: string): never {
    throw new ToolReplayError(ErrorCodes.INVALID_FAULTS, `Faults ${this.#source} are invalid: ${where} ${problem}. ${fix}`, {
      details: { source: this.#source, field: where, ...(rule !== undefined ? { rule } : {}) },
    })
  }

  config(raw: unknown): FaultsConfig {
    const top = this.object(raw, '(top level)', 'Write an object with "rules" (and optionally "seed", "effects", "contracts").')
    this.keys(top, '(top level)', TOP_KEYS)
    if (top.rules === undefined && top.contracts === undefined) this.fail('(top level)', 'has neither "rules" nor "contracts"', 'Add a "rules" list.')
    const config: FaultsConfig = { source: this.#source, rules: [], effects: [], contracts: [] }
    if (top.seed !== undefined) config.seed = this.seed(top.seed)
    const rules = top.rules === undefined ? [] : this.list(top.rules, 'rules', 'Write rules as a list: rules: [{ id, target, fault }].')
    const ids = new Set<string>()
    rules.forEach((r, i) => {
      const rule = this.rule(r, i)
      if (ids.has(rule.id)) this.fail(`rules[${i}].id`, `repeats "${rule.id}"`, 'Give every rule its own id: reports and traces name rules by id.', rule.id)
      ids.add(rule.id)
      config.rules.push(rule)
    })
    if (top.effects !== undefined)
      config.effects = this.list(top.effects, 'effects', 'Write effects as a list: effects: [{ target, id }].').map((e, i) => this.effect(e, `effects[${i}]`))
    if (top.contracts !== undefined)
      config.contracts = this.list(top.contracts, 'contracts', 'Write contracts as a list, e.g. contracts: [no-duplicate-effects, { max-calls: 5 }].').map(
        (c, i) => this.contract(c, `contracts[${i}]`),
      )
    if (config.contracts.some((c) => c.kind === 'no-duplicate-effects') && config.effects.length === 0) {
      this.fail(
        'contracts',
        'list no-duplicate-effects but "effects" is empty',
        'Add an effect rule naming the requests that commit something, e.g. effects: [{ target: { method: POST, url: "/shipments" }, id: "$.shipment.id" }].',
      )
    }
    if (config.contracts.some((c) => c.kind === 'all-rules-fired') && config.rules.length === 0) {
      this.fail('contracts', 'list all-rules-fired but "rules" is empty', 'Add the fault rules to the same file, or drop all-rules-fired.')
    }
    return config
  }

  seed(v: unknown): string {
    if (typeof v === 'bigint') return v.toString()
    if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v)
    if (isExactNumber(v) && /^-?\d+$/.test(v.rawJSON)) return BigInt(v.rawJSON).toString()
    if (typeof v === 'string' && v.trim() !== '' && v.length <= 128) return v
    return this.fail('seed', `is ${describe(v)}`, 'Write an integer or a short string, e.g. seed: 42.')
  }

  rule(raw: unknown, i: number): FaultRule {
    const at = `rules[${i}]`
    const o = this.object(raw, at, 'Write each rule as an object: { id, target, fault }.')
    const id = typeof o.id === 'string' ? o.id : undefined
    const where = (field: string) => `${at}${id ? ` (id "${id}")` : ''}.${field}`
    const fail = (field: string, problem: string, fix: string): never => this.fail(where(field), problem, fix, id)
    this.keys(o, at + (id ? ` (id "${id}")` : ''), RULE_KEYS, id)
    if (id === undefined || !RULE_ID.test(id))
      fail('id', o.id === undefined ? 'is missing' : `is ${describe(o.id)}`, 'Name the rule with letters, digits, "-", "_" or ".", e.g. id: lost-ack.')
    const ruleId = id as string
    if (!(FAULT_KINDS as readonly unknown[]).includes(o.fault))
      fail('fault', o.fault === undefined ? 'is missing' : `is ${describe(o.fault)}`, `Use one of ${FAULT_KINDS.join(', ')}.`)
    const fault = o.fault as RuleFaultKind
    const target = this.target(o.target, where('target'), ruleId)
    const mcp = 'mcp' in target.spec
    if (mcp && !MCP_KINDS.includes(fault))
      fail('fault', `is ${fault}, which does not apply to an MCP target`, `On an mcp target use one of ${MCP_KINDS.join(', ')}.`)
    if (!mcp && (fault === 'tool_error' || fault === 'server_crash'))
      fail('fault', `is ${fault}, which only applies to MCP servers`, 'Target a tool: target: { mcp: { tool: write_file } }.')
    const base = { id: ruleId, target, optional: false }
    const rule = { ...base, fault, options: this.options(fault, o.options, where('options'), ruleId) } as FaultRule
    if (o.optional !== undefined) {
      if (typeof o.optional !== 'boolean') fail('optional', `is ${describe(o.optional)}`, 'Write optional: true or false.')
      rule.optional = o.optional as boolean
    }
    if (o.calls !== undefined) {
      const calls = this.list(o.calls, where('calls'), 'Write calls: [1, 3] (call numbers start at 1).', ruleId).map((c) =>
        this.int(c, where('calls'), 1, 'Calls count from 1: calls: [1] is the first matching request.', ruleId),
      )
      if (calls.length === 0) fail('calls', 'is empty', 'List at least one call number, or drop "calls".')
      rule.calls = [...new Set(calls)].sort((a, b) => a - b)
    }
    if (o.first !== undefined) rule.first = this.int(o.first, where('first'), 1, 'Write first: N with N >= 1 (the first N matching requests fault).', ruleId)
    if (o.limit !== undefined) rule.limit = this.int(o.limit, where('limit'), 1, 'Write limit: N with N >= 1 (at most N triggers).', ruleId)
    if (o.probability !== undefined) {
      const p = this.number(o.probability, where('probability'), ruleId)
      if (!(p > 0 && p <= 1)) fail('probability', `is ${p}`, 'Write a probability in (0, 1], e.g. probability: 0.2.')
      rule.probability = p
    }
    if (o.window !== undefined) {
      const w = this.object(o.window, where('window'), 'Write window: { fromMs, toMs }.', ruleId)
      this.keys(w, where('window'), ['fromMs', 'toMs'], ruleId)
      const fromMs = w.fromMs === undefined ? 0 : this.int(w.fromMs, where('window.fromMs'), 0, 'Write fromMs in ms since the run started (>= 0).', ruleId)
      const toMs =
        w.toMs === undefined ? Number.POSITIVE_INFINITY : this.int(w.toMs, where('window.toMs'), 0, 'Write toMs in ms since the run started.', ruleId)
      if (toMs <= fromMs) fail('window', `ends (${toMs} ms) before it starts (${fromMs} ms)`, 'Make toMs greater than fromMs.')
      rule.window = { fromMs, toMs }
    }
    if (o.quota !== undefined) {
      const q = this.object(o.quota, where('quota'), 'Write quota: { limit: N, windowMs: MS }.', ruleId)
      this.keys(q, where('quota'), ['limit', 'windowMs'], ruleId)
      rule.quota = {
        limit: this.int(q.limit, where('quota.limit'), 0, 'Write the number of calls that pass per window (>= 0).', ruleId),
        windowMs: this.int(q.windowMs, where('quota.windowMs'), 1, 'Write the window length in ms (>= 1).', ruleId),
      }
    }
    if (o.key !== undefined) {
      const k = this.object(o.key, where('key'), 'Write key: { header: idempotency-key }.', ruleId)
      this.keys(k, where('key'), ['header'], ruleId)
      if (typeof k.header !== 'string' || !HEADER_NAME.test(k.header))
        fail('key.header', `is ${describe(k.header)}`, 'Name a request header, e.g. key: { header: idempotency-key }.')
      rule.key = { header: (k.header as string).toLowerCase() }
    }
    return rule
  }

  target(raw: unknown, at: string, rule?: string): Target {
    const o = this.object(raw, at, 'Write target: { method: POST, url: "/shipments" } or target: { host: api.openai.com }.', rule)
    if (o.mcp !== undefined) return this.mcpTarget(o, at, rule)
    this.keys(o, at, ['method', 'url', 'host', 'mcp'], rule)
    if ((o.url === undefined) === (o.host === undefined))
      this.fail(at, 'needs exactly one of "url" and "host"', 'Write target: { method: POST, url: "/shipments" } or target: { host: api.openai.com }.', rule)
    if (o.method !== undefined && typeof o.method !== 'string' && !(Array.isArray(o.method) && o.method.every((m) => typeof m === 'string'))) {
      this.fail(`${at}.method`, `is ${describe(o.method)}`, 'Write a method (POST) or a list ([PUT, PATCH]).', rule)
    }
    const pattern = o.url ?? o.host
    if (typeof pattern !== 'string') this.fail(`${at}.${o.url !== undefined ? 'url' : 'host'}`, `is ${describe(pattern)}`, 'Write a string.', rule)
    try {
      return compileTarget({
        ...(o.method !== undefined ? { method: o.method } : {}),
        ...(o.url !== undefined ? { url: o.url } : { host: o.host }),
      } as TargetSpec)
    } catch (err) {
      if (!(err instanceof TargetSyntaxError)) throw err
      return this.fail(at, `is not usable: ${err.message}`, 'See docs/faults.md ("Rules") for target patterns.', rule)
    }
  }

  mcpTarget(o: Record<string, unknown>, at: string, rule?: string): Target {
    this.keys(o, at, ['mcp'], rule)
    const m = this.object(o.mcp, `${at}.mcp`, 'Write target: { mcp: { tool: write_file } } (optionally server and method).', rule)
    this.keys(m, `${at}.mcp`, ['tool', 'server', 'method'], rule)
    for (const k of ['tool', 'server', 'method'])
      if (m[k] !== undefined && typeof m[k] !== 'string') this.fail(`${at}.mcp.${k}`, `is ${describe(m[k])}`, 'Write a name, e.g. tool: write_file.', rule)
    try {
      return compileTarget({ mcp: m as { tool?: string; server?: string; method?: string } })
    } catch (err) {
      if (!(err instanceof TargetSyntaxError)) throw err
      return this.fail(`${at}.mcp`, `is not usable: ${err.message}`, 'Write target: { mcp: { tool: write_file } }.', rule)
    }
  }

  options<K extends RuleFaultKind>(kind: K, raw: unknown, at: string, rule: string): FaultOptionsByKind[K] {
    const o = raw === undefined ? {} : this.object(raw, at, 'Write options as an object.', rule)
    const known: Record<RuleFaultKind, string[]> = {
      response_lost: ['code'],
      timeout: ['ms', 'code'],
      rate_limit: ['retryAfterMs', 'provider'],
      server_error: ['status', 'provider', 'forward', 'retryAfterMs'],
      latency: ['ms', 'minMs', 'maxMs', 'meanMs', 'phase'],
      schema_drift: ['changes'],
      blackout: ['mode', 'provider'],
      stream_cut: ['afterEvents', 'afterBytes'],
      stream_error: ['afterEvents', 'afterBytes', 'code'],
      tool_error: ['text'],
      server_crash: [],
      ...WEBSOCKET_OPTION_KEYS,
    }
    this.keys(o, at, known[kind], rule)
    const code = (fallback: FaultErrorCode): FaultErrorCode => {
      if (o.code === undefined) return fallback
      if (!(FAULT_ERROR_CODES as readonly unknown[]).includes(o.code))
        this.fail(`${at}.code`, `is ${describe(o.code)}`, `Use one of ${FAULT_ERROR_CODES.join(', ')}.`, rule)
      return o.code as FaultErrorCode
    }
    const provider = (): { provider?: ProviderShape } => {
      if (o.provider === undefined) return {}
      if (!(PROVIDER_SHAPES as readonly unknown[]).includes(o.provider))
        this.fail(`${at}.provider`, `is ${describe(o.provider)}`, `Use one of ${PROVIDER_SHAPES.join(', ')} (default: from the host).`, rule)
      return { provider: o.provider as ProviderShape }
    }
    const retryAfter = (): { retryAfterMs?: number } =>
      o.retryAfterMs === undefined
        ? {}
        : { retryAfterMs: this.int(o.retryAfterMs, `${at}.retryAfterMs`, 0, 'Write the delay the client is asked to wait, in ms.', rule) }
    const out: Record<RuleFaultKind, () => unknown> = {
      response_lost: () => ({ code: code(FAULT_DEFAULTS.code.response_lost) }),
      timeout: () => ({
        ms:
          o.ms === undefined
            ? FAULT_DEFAULTS.timeoutMs
            : this.int(o.ms, `${at}.ms`, 0, 'Write how long the client waits before the connection fails, in ms.', rule),
        code: code(FAULT_DEFAULTS.code.timeout),
      }),
      rate_limit: () => ({ ...retryAfter(), ...provider() }),
      server_error: () => {
        const status = o.status === undefined ? FAULT_DEFAULTS.serverErrorStatus : o.status
        const n = typeof status === 'bigint' ? Number(status) : status
        if (!(SERVER_ERROR_STATUSES as readonly unknown[]).includes(n))
          this.fail(`${at}.status`, `is ${describe(status)}`, `Use one of ${SERVER_ERROR_STATUSES.join(', ')}.`, rule)
        if (o.forward !== undefined && typeof o.forward !== 'boolean')
          this.fail(`${at}.forward`, `is ${describe(o.forward)}`, 'Write forward: true (the upstream commits, the app gets the error) or false.', rule)
        return { status: n, forward: o.forward === true, ...provider(), ...retryAfter() }
      },
      latency: () => ({ distribution: this.latency(o, at, rule), phase: this.latencyPhase(o.phase, `${at}.phase`, rule) }),
      schema_drift: () => ({
        changes: this.list(o.changes, `${at}.changes`, 'List changes, e.g. changes: [{ op: rename, path: $.shipment.id, to: shipment_id }].', rule).map(
          (c, j) => this.drift(c, `${at}.changes[${j}]`, rule),
        ),
      }),
      blackout: () => {
        if (o.mode !== undefined && o.mode !== 'refused' && o.mode !== '503')
          this.fail(`${at}.mode`, `is ${describe(o.mode)}`, 'Write mode: refused (connection refused) or mode: "503".', rule)
        return { mode: o.mode ?? 'refused', ...provider() }
      },
      stream_cut: () => ({ after: this.streamPoint(o, at, rule) }),
      stream_error: () => ({ after: this.streamPoint(o, at, rule), code: code(FAULT_DEFAULTS.code.stream_error) }),
      tool_error: () => {
        if (o.text !== undefined && typeof o.text !== 'string')
          this.fail(`${at}.text`, `is ${describe(o.text)}`, 'Write the error text the tool returns.', rule)
        return { text: (o.text as string | undefined) ?? 'The tool failed.' }
      },
      server_crash: () => ({}),
      ws_close: () => websocketFaultOptions('ws_close', o, at, rule, this),
      ws_drop: () => websocketFaultOptions('ws_drop', o, at, rule, this),
      ws_delay: () => websocketFaultOptions('ws_delay', o, at, rule, this),
    }
    const options = out[kind]() as FaultOptionsByKind[K]
    if (kind === 'schema_drift' && (options as FaultOptionsByKind['schema_drift']).changes.length === 0)
      this.fail(`${at}.changes`, 'is empty', 'List at least one change.', rule)
    return options
  }

  latency(o: Record<string, unknown>, at: string, rule: string): LatencyDistribution {
    const ms = (k: string) => this.int(o[k], `${at}.${k}`, 0, 'Write a delay in ms (>= 0).', rule)
    if (o.ms !== undefined) {
      if (o.minMs !== undefined || o.maxMs !== undefined || o.meanMs !== undefined)
        this.fail(at, 'mixes a fixed ms with a distribution', 'Write either ms, or minMs and maxMs (uniform), or meanMs and maxMs (exponential).', rule)
      return { kind: 'fixed', ms: ms('ms') }
    }
    if (o.meanMs !== undefined) {
      if (o.minMs !== undefined) this.fail(`${at}.minMs`, 'does not go with meanMs', 'An exponential latency takes meanMs and maxMs.', rule)
      const meanMs = ms('meanMs')
      const maxMs = o.maxMs === undefined ? meanMs * 10 : ms('maxMs')
      return { kind: 'exponential', meanMs, maxMs }
    }
    if (o.minMs === undefined || o.maxMs === undefined)
      this.fail(at, 'has no delay', 'Write ms: 300, or minMs and maxMs (uniform), or meanMs and maxMs (exponential).', rule)
    const minMs = ms('minMs')
    const maxMs = ms('maxMs')
    if (maxMs < minMs) this.fail(`${at}.maxMs`, `(${maxMs}) is below minMs (${minMs})`, 'Make maxMs >= minMs.', rule)
    return { kind: 'uniform', minMs, maxMs }
  }

  latencyPhase(v: unknown, at: string, rule: string): 'before-forward' | 'after-response' {
    if (v === undefined) return 'before-forward'
    if (v !== 'before-forward' && v !== 'after-response')
      this.fail(at, `is ${describe(v)}`, 'Write phase: before-forward (nothing sent yet) or after-response (the upstream already answered).', rule)
    return v
  }

  streamPoint(o: Record<string, unknown>, at: string, rule: string): StreamPoint {
    if ((o.afterEvents === undefined) === (o.afterBytes === undefined))
      this.fail(at, 'needs exactly one of afterEvents and afterBytes', 'Write afterEvents: N (whole events of an event stream) or afterBytes: N.', rule)
    return o.afterEvents !== undefined
      ? { events: this.int(o.afterEvents, `${at}.afterEvents`, 0, 'Write the number of whole events the client gets (>= 0).', rule) }
      : { bytes: this.int(o.afterBytes, `${at}.afterBytes`, 0, 'Write the number of body bytes the client gets (>= 0).', rule) }
  }

  drift(raw: unknown, at: string, rule: string): DriftChange {
    const o = this.object(raw, at, 'Write a change as { op, path, ... }.', rule)
    const path = this.jsonPath(o.path, `${at}.path`, rule)
    const ops: Record<string, string[]> = { type: ['op', 'path', 'to'], remove: ['op', 'path'], add: ['op', 'path', 'value'], rename: ['op', 'path', 'to'] }
    const keys = typeof o.op === 'string' ? ops[o.op] : undefined
    if (keys === undefined)
      this.fail(`${at}.op`, `is ${describe(o.op)}`, "Use op: type (change a value's type), remove (missing field), add (extra field) or rename.", rule)
    this.keys(o, at, keys as string[], rule)
    if (o.op === 'remove') return { op: 'remove', path }
    if (o.op === 'add') {
      if (!('value' in o)) this.fail(`${at}.value`, 'is missing', 'Give the extra field a value, e.g. value: "surprise".', rule)
      if (path.includes('*')) this.fail(`${at}.path`, 'has a wildcard', 'An added field needs a concrete path, e.g. $.shipment.extra.', rule)
      return { op: 'add', path, value: plain(o.value) }
    }
    if (o.op === 'rename') {
      if (typeof o.to !== 'string' || o.to === '') this.fail(`${at}.to`, `is ${describe(o.to)}`, 'Write the new key name, e.g. to: shipment_id.', rule)
      const last = parseJsonPath(path).at(-1)
      if (typeof last !== 'string' || last === '*') this.fail(`${at}.path`, 'does not end in a key', 'Rename a key: $.shipment.id.', rule)
      return { op: 'rename', path, to: o.to as string }
    }
    const types = ['string', 'number', 'boolean', 'null', 'array', 'object']
    if (!types.includes(o.to as string)) this.fail(`${at}.to`, `is ${describe(o.to)}`, `Use one of ${types.join(', ')}.`, rule)
    return { op: 'type', path, to: o.to as 'string' }
  }

  jsonPath(v: unknown, at: string, rule?: string): string {
    if (typeof v !== 'string') this.fail(at, `is ${describe(v)}`, 'Write a JSON path such as $.shipment.id.', rule)
    try {
      if (parseJsonPath(v).length === 0) this.fail(at, 'is the whole body', 'Name a field, e.g. $.shipment.id.', rule)
    } catch (err) {
      if ((err as ToolReplayError).code !== ErrorCodes.INVALID_OPTION) throw err
      this.fail(
        at,
        `is not a JSON path (${(err as Error).message.replace(/^Invalid JSON path "[^"]*": /, '').replace(/\. Use forms.*$/, '')})`,
        'Use forms like $.a.b, $.items[0].id or $.items[*].id.',
        rule,
      )
    }
    return v
  }

  valueRef(v: unknown, at: string, what: 'response' | 'request'): ValueRef {
    if (typeof v === 'string' && v.startsWith('$')) return { from: 'json', path: this.jsonPath(v, at) }
    if (typeof v === 'string' && /^header:/i.test(v) && HEADER_NAME.test(v.slice(7))) return { from: 'header', name: v.slice(7).toLowerCase() }
    return this.fail(at, `is ${describe(v)}`, `Write a JSON path in the ${what} body ($.shipment.id) or a ${what} header (header:location).`)
  }

  effect(raw: unknown, at: string): EffectRule {
    const o = this.object(raw, at, 'Write an effect as { target, id }.')
    this.keys(o, at, ['target', 'id', 'group', 'name'])
    const effect: EffectRule = { target: this.target(o.target, `${at}.target`), name: 'effect' }
    if (o.id !== undefined) effect.id = this.valueRef(o.id, `${at}.id`, 'response')
    if (o.group !== undefined) effect.group = this.valueRef(o.group, `${at}.group`, 'request')
    if (o.name !== undefined) {
      if (typeof o.name !== 'string' || !/^[\w -]{1,40}$/.test(o.name))
        this.fail(`${at}.name`, `is ${describe(o.name)}`, 'Write a short noun, e.g. name: shipment.')
      effect.name = o.name as string
    }
    return effect
  }

  contract(raw: unknown, at: string): ContractSpec {
    const fix = `Write a contract name (${CONTRACT_KINDS.join(', ')}) or { max-calls: 5 }.`
    let kind: unknown = raw
    let arg: unknown
    if (raw !== null && typeof raw === 'object' && !Array.isArray(raw)) {
      const entries = Object.entries(raw)
      if (entries.length !== 1) this.fail(at, 'must have exactly one key, the contract name', fix)
      ;[kind, arg] = entries[0] as [string, unknown]
    }
    if (!(CONTRACT_KINDS as readonly unknown[]).includes(kind)) this.fail(at, `is ${describe(kind)}`, fix)
    const k = kind as ContractSpec['kind']
    const args = (keys: string[]) => {
      if (arg === undefined || arg === null) return {}
      const o = this.object(arg, `${at}.${k}`, `Write ${k}'s options as an object.`)
      this.keys(o, `${at}.${k}`, keys)
      return o
    }
    if (k === 'no-duplicate-effects' || k === 'all-rules-fired') {
      args([])
      return { kind: k }
    }
    if (k === 'max-calls' || k === 'bounded-retries') {
      const field = k === 'max-calls' ? 'limit' : 'retries'
      const o = typeof arg === 'object' && arg !== null && !isExactNumber(arg) ? args([field, 'target']) : { [field]: arg }
      if (o[field] === undefined) this.fail(`${at}.${k}`, `needs a number`, `Write { ${k}: N }.`)
      const n = this.int(o[field], `${at}.${k}`, k === 'max-calls' ? 1 : 0, `Write { ${k}: N }.`)
      const target = o.target === undefined ? undefined : this.target(o.target, `${at}.${k}.target`)
      return k === 'max-calls' ? { kind: k, limit: n, ...(target ? { target } : {}) } : { kind: k, retries: n, ...(target ? { target } : {}) }
    }
    const o = args(['toleranceMs', 'scope'])
    const toleranceMs = o.toleranceMs === undefined ? 0 : this.int(o.toleranceMs, `${at}.${k}.toleranceMs`, 0, 'Write a tolerance in ms (>= 0).')
    if (o.scope !== undefined && o.scope !== 'call' && o.scope !== 'host')
      this.fail(`${at}.${k}.scope`, `is ${describe(o.scope)}`, 'Write scope: call (retries of the same request) or host (any request to that host).')
    return { kind: 'honours-retry-after', toleranceMs, scope: (o.scope as 'call' | 'host' | undefined) ?? 'call' }
  }

  object(v: unknown, at: string, fix: string, rule?: string): Record<string, unknown> {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || isExactNumber(v)) this.fail(at, `is ${describe(v)}, not an object`, fix, rule)
    return v as Record<string, unknown>
  }

  list(v: unknown, at: string, fix: string, rule?: string): unknown[] {
    if (!Array.isArray(v)) this.fail(at, `is ${describe(v)}, not a list`, fix, rule)
    return v
  }

  keys(o: Record<string, unknown>, at: string, known: string[], rule?: string): void {
    for (const k of Object.keys(o)) {
      if (known.includes(k)) continue
      const near = known.find((n) => editDistance(n.toLowerCase(), k.toLowerCase()) <= 2)
      this.fail(`${at}.${k}`, 'is not a known field', near ? `Did you mean "${near}"?` : `Known fields: ${known.join(', ') || '(none)'}.`, rule)
    }
  }

  number(v: unknown, at: string, rule?: string): number {
    const n = typeof v === 'bigint' ? Number(v) : isExactNumber(v) ? Number(v.rawJSON) : v
    if (typeof n !== 'number' || !Number.isFinite(n)) this.fail(at, `is ${describe(v)}`, 'Write a number.', rule)
    return n
  }

  int(v: unknown, at: string, min: number, fix: string, rule?: string): number {
    const n = typeof v === 'bigint' ? Number(v) : isExactNumber(v) ? Number(v.rawJSON) : v
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min)
      this.fail(at, `is ${describe(v)}${typeof n === 'number' && Number.isSafeInteger(n) ? ` (at least ${min} expected)` : ''}`, fix, rule)
    return n
  }
}
