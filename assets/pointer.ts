/**
 * The pointer file committed with the app, `tool-replay.assets.json`: which assets repository holds its
 * recordings, which tag of it, and which traces with which digests. The digests pin the content: a tag
 * moved on the remote, or a local trace re-recorded and not pushed, shows as a digest that differs.
 *
 *   {
 *     "format": "tool-replay-assets",
 *     "version": 1,
 *     "remote": "https://github.com/acme/app-recordings.git",
 *     "tag": "tool-replay/3f2a9c1e5b7d",
 *     "dir": "traces",
 *     "traces": { "checkout": "<sha256 of the trace file>", "search": "<sha256>" }
 *   }
 *
 * `tag` is absent until the first push; `dir` (default "traces") is the folder of the assets repository the
 * trace files live in (`<dir>/<name>.trace.json`, big bodies in `<dir>/blobs/<sha256>`); `tagPrefix` (default
 * "tool-replay/") starts the tags push makes.
 */
import { randomBytes } from 'node:crypto'
import { readFile, rename, unlink, writeFile } from 'node:fs/promises'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { assertTraceName, ErrorCodes, parseJson, ToolReplayError } from '../trace/index.ts'

/** The pointer file's name, looked for in the working directory. */
export const POINTER_FILE = 'tool-replay.assets.json'
/** The `format` field of every pointer file. */
export const POINTER_FORMAT = 'tool-replay-assets'
/** The folder of the assets repository trace files go in, unless the pointer says otherwise. */
export const DEFAULT_ASSETS_DIR = 'traces'
/** What the tags push makes start with, unless the pointer says otherwise. */
export const DEFAULT_TAG_PREFIX = 'tool-replay/'

/** A parsed pointer file. */
export interface AssetsPointer {
  remote: string
  tag?: string
  dir: string
  tagPrefix: string
  /** Trace name → SHA-256 digest of its trace file (the file's `digest`). */
  traces: Record<string, string>
}

const KEYS = ['format', 'version', 'remote', 'tag', 'dir', 'tagPrefix', 'traces']

/** Parses and checks pointer-file text; every failure is TR_ASSETS_INVALID naming the file and the field. */
export function parsePointer(text: string, file = POINTER_FILE): AssetsPointer {
  const fail = (field: string, why: string): never => {
    throw new ToolReplayError(
      ErrorCodes.ASSETS_INVALID,
      `The assets pointer ${file} is invalid: ${field} ${why}. Fix the file, or write it again with \`tr-proxy assets push\`.`,
      {
        details: { file, field },
      },
    )
  }
  let raw: unknown
  try {
    raw = parseJson(text)
  } catch (err) {
    fail('(top level)', `is not valid JSON (${(err as Error).message})`)
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return fail('(top level)', 'must be an object')
  const o = raw as Record<string, unknown>
  for (const k of Object.keys(o)) if (!KEYS.includes(k)) fail(k, `is not a known field (known: ${KEYS.join(', ')})`)
  if (o.format !== POINTER_FORMAT) fail('format', `must be "${POINTER_FORMAT}"`)
  if (o.version !== 1) fail('version', `is ${JSON.stringify(o.version)}; this Tool Replay reads version 1`)
  const pointer: AssetsPointer = {
    remote: checkRemote(o.remote, fail),
    dir: o.dir === undefined ? DEFAULT_ASSETS_DIR : checkDir(o.dir, fail),
    tagPrefix: o.tagPrefix === undefined ? DEFAULT_TAG_PREFIX : checkTag(o.tagPrefix, 'tagPrefix', fail, true),
    traces: checkTraces(o.traces, fail),
  }
  if (o.tag !== undefined) pointer.tag = checkTag(o.tag, 'tag', fail)
  return pointer
}

type Fail = (field: string, why: string) => never

/**
 * A remote git understands; never one with a password in it (the pointer is committed: use a credential
 * helper, SSH keys or a token in the environment instead).
 */
export function checkRemote(v: unknown, fail: Fail): string {
  if (typeof v !== 'string' || v.trim() === '' || v.startsWith('-')) return fail('remote', 'must be a git remote URL or path (not starting with "-")')
  if (/^[a-z][a-z0-9+.-]*:\/\/[^/@]*:[^/@]*@/i.test(v))
    return fail('remote', 'holds a password; the pointer is committed: use a git credential helper or SSH instead')
  return v
}

function checkDir(v: unknown, fail: Fail): string {
  const ok = typeof v === 'string' && v !== '' && v.split('/').every((s) => s !== '' && s !== '.' && s !== '..' && !/[\0\\]/.test(s))
  return ok ? (v as string) : fail('dir', 'must be a relative folder of the assets repository, like "traces" or "recordings/app" (no "..", no leading "/")')
}

/** A tag name git accepts (`git check-ref-format`, the rules that matter here); a prefix may end in "/". */
function checkTag(v: unknown, field: string, fail: Fail, prefix = false): string {
  const s = typeof v === 'string' ? v : ''
  const body = prefix && s.endsWith('/') ? s.slice(0, -1) : s
  const bad =
    (!prefix && s === '') ||
    /[\0-\x20\x7f~^:?*[\\]|\.\.|@\{|\/\/|\.lock(\/|$)|\/\.|^\.|^-/.test(s) ||
    (body !== '' && (body.endsWith('.') || body.endsWith('/')))
  return bad ? fail(field, 'is not a valid git tag name (letters, digits, "-", "_", "." and "/" between parts; no spaces, "..", "~", "^", ":")') : s
}

function checkTraces(v: unknown, fail: Fail): Record<string, string> {
  if (v === undefined) return {}
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return fail('traces', 'must be an object of trace name → sha256 digest')
  const out: Record<string, string> = {}
  for (const [name, digest] of Object.entries(v as Record<string, unknown>)) {
    try {
      assertTraceName(name)
    } catch (err) {
      fail(`traces["${name}"]`, `is not a trace name (${(err as Error).message})`)
    }
    if (typeof digest !== 'string' || !/^[0-9a-f]{64}$/.test(digest)) fail(`traces["${name}"]`, 'must be the sha256 digest of the trace file (64 hex digits)')
    out[name] = digest as string
  }
  return out
}

/**
 * The remote as git is given it: URLs (`https://`, `ssh://`, `git://`, `file://`) and scp-like `host:path` as
 * they are; a local path relative to the pointer's folder (the cache repository runs git elsewhere).
 */
export function gitRemote(remote: string, pointerFile: string): string {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(remote) || /^[^/]+:/.test(remote) || isAbsolute(remote)) return remote
  return resolve(dirname(pointerFile), remote)
}

/** Deterministic pointer text: fixed key order, traces sorted by name, so a push changes only what changed. */
export function formatPointer(p: AssetsPointer): string {
  const traces: Record<string, string> = {}
  for (const name of Object.keys(p.traces).sort()) traces[name] = p.traces[name] as string
  const out: Record<string, unknown> = { format: POINTER_FORMAT, version: 1, remote: p.remote }
  if (p.tag !== undefined) out.tag = p.tag
  if (p.dir !== DEFAULT_ASSETS_DIR) out.dir = p.dir
  if (p.tagPrefix !== DEFAULT_TAG_PREFIX) out.tagPrefix = p.tagPrefix
  out.traces = traces
  return `${JSON.stringify(out, null, 2)}\n`
}

/** Reads a pointer file; a missing file is TR_ASSETS_INVALID saying how to create one. */
export async function readPointer(file: string): Promise<AssetsPointer> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT'
    throw new ToolReplayError(
      ErrorCodes.ASSETS_INVALID,
      missing
        ? `No assets pointer ${file}. Create it with \`tr-proxy assets push --remote URL TRACE...\`, or run in the folder that holds it (--pointer FILE).`
        : `Cannot read the assets pointer ${file}: ${(err as Error).message}.`,
      { cause: err, details: { file } },
    )
  }
  return parsePointer(text, file)
}

/** Writes a pointer file atomically (a temp file renamed over it): a reader never sees half a file. */
export async function writePointer(file: string, p: AssetsPointer): Promise<void> {
  const tmp = join(dirname(file), `.${POINTER_FILE}.${randomBytes(6).toString('hex')}.tmp`)
  try {
    await writeFile(tmp, formatPointer(p))
    await rename(tmp, file)
  } catch (err) {
    await unlink(tmp).catch(() => {})
    throw new ToolReplayError(ErrorCodes.STORE_IO, `Failed to write the assets pointer ${file}: ${(err as Error).message}. Check the folder is writable.`, {
      cause: err,
    })
  }
}
