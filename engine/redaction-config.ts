/**
 * The redaction settings file, read the same way by the CLI (`tr-proxy record/replay/serve`), by `install()`
 * and by the test setups, so a secret redacted in one capture path is redacted in the other:
 *
 *   // .tool-replay/config.json (or the file named by TOOL_REPLAY_CONFIG / --config)
 *   { "redaction": { "headers": ["x-tenant-token"], "queryParams": ["sig"], "bodyPaths": ["$.api_key"] } }
 *
 * Settings only add to the defaults (DEFAULT_REDACTED_HEADERS, ...) and to each other: the file, the CLI
 * flags and `install({ redaction })` are merged as a union, so nothing can switch a redaction off.
 */
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { ErrorCodes, type OptionDeclaration, parseJson, parseJsonPath, ToolReplayError } from '../trace/index.ts'
import { REDACTION_OPTIONS, type RedactionOptions } from './redaction.ts'

/** The redaction lists, as REDACTION_OPTIONS declares them (the settings file's fields, merged by mergeRedaction). */
const REDACTION_KEYS = Object.keys(REDACTION_OPTIONS) as Array<keyof RedactionOptions>

/** The settings file looked for in the working directory when TOOL_REPLAY_CONFIG does not name one. */
export const DEFAULT_CONFIG_FILE = '.tool-replay/config.json'

/** `config`: the settings file (the CLI's `--config`, `install({ config })`), declared once. */
export const CONFIG_OPTIONS = {
  config: {
    flag: 'config',
    type: 'string',
    help: `Settings file whose "redaction" applies too (default: $TOOL_REPLAY_CONFIG, else ${DEFAULT_CONFIG_FILE} if present)`,
  },
} as const satisfies Record<string, OptionDeclaration>

/** What a settings file holds. */
export interface ToolReplayConfig {
  redaction?: RedactionOptions
}

/** Where to look: an explicit file (must exist), else TOOL_REPLAY_CONFIG (must exist), else the default (may be absent). */
export interface ConfigSource {
  file?: string
  cwd?: string
  env?: Record<string, string | undefined>
}

/**
 * Reads and checks the settings file. Returns `{}` when no file was named and the default one is absent.
 * Throws TR_INVALID_OPTION naming the file and the field for anything else that is wrong.
 * @example
 * const { config } = await loadConfig()           // .tool-replay/config.json, if present
 * const redaction = mergeRedaction(config.redaction, { bodyPaths: ['$.token'] })
 */
export async function loadConfig(source: ConfigSource = {}): Promise<{ file: string | undefined; config: ToolReplayConfig }> {
  const env = source.env ?? process.env
  const named = source.file ?? (env.TOOL_REPLAY_CONFIG || undefined)
  const file = resolve(source.cwd ?? process.cwd(), named ?? DEFAULT_CONFIG_FILE)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    if (named === undefined && (err as NodeJS.ErrnoException).code === 'ENOENT') return { file: undefined, config: {} }
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Cannot read the Tool Replay settings file ${file}: ${(err as Error).message}. Fix the path (--config or TOOL_REPLAY_CONFIG), or remove the setting.`,
      { cause: err, details: { file } },
    )
  }
  return { file, config: parseConfig(text, file) }
}

/** Checks the text of a settings file; every failure names the file and the field. */
export function parseConfig(text: string, file = DEFAULT_CONFIG_FILE): ToolReplayConfig {
  const fail = (field: string, why: string): never => {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `The Tool Replay settings file ${file} is invalid: ${field} ${why}. Expected {"redaction": {"headers": [...], "queryParams": [...], "bodyPaths": ["$.api_key"]}}.`,
      { details: { file, field } },
    )
  }
  let raw: unknown
  try {
    raw = parseJson(text)
  } catch (err) {
    fail('(top level)', `is not valid JSON (${(err as Error).message})`)
  }
  const top = object(raw, '(top level)', ['redaction'], fail)
  if (top.redaction === undefined) return {}
  const r = object(top.redaction, 'redaction', REDACTION_KEYS, fail)
  const redaction: RedactionOptions = {}
  for (const key of REDACTION_KEYS) {
    if (r[key] === undefined) continue
    const list = r[key]
    if (!Array.isArray(list) || !list.every((v) => typeof v === 'string' && v.trim() !== '')) fail(`redaction.${key}`, 'must be an array of non-empty strings')
    redaction[key] = list as string[]
  }
  for (const [i, p] of (redaction.bodyPaths ?? []).entries()) {
    try {
      parseJsonPath(p)
    } catch (err) {
      fail(`redaction.bodyPaths[${i}]`, `is not a JSON path (${(err as Error).message})`)
    }
  }
  return { redaction }
}

function object(v: unknown, field: string, keys: string[], fail: (field: string, why: string) => never): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) fail(field, 'must be an object')
  const o = v as Record<string, unknown>
  for (const k of Object.keys(o))
    if (!keys.includes(k)) fail(field === '(top level)' ? k : `${field}.${k}`, `is not a known setting (known: ${keys.join(', ')})`)
  return o
}

/** The union of redaction settings (each list deduplicated, first spelling kept); undefined parts are skipped. */
export function mergeRedaction(...parts: Array<RedactionOptions | undefined>): RedactionOptions {
  const out: RedactionOptions = {}
  for (const key of REDACTION_KEYS) {
    const seen = new Set<string>()
    const list: string[] = []
    for (const part of parts) {
      for (const v of part?.[key] ?? []) {
        const id = key === 'bodyPaths' ? v : v.toLowerCase()
        if (!seen.has(id)) {
          seen.add(id)
          list.push(v)
        }
      }
    }
    if (list.length > 0) out[key] = list
  }
  return out
}
