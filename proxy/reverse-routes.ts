/**
 * Reverse mode: the proxy serves as an upstream's origin on its own port, so a client that takes a base URL
 * (`OPENAI_BASE_URL=http://127.0.0.1:8080/v1`) needs no proxy variables and no CA. `--reverse URL` mounts one
 * upstream at `/`; `--reverse NAME=URL` mounts it under the path prefix `/NAME/`. A request's local URL maps
 * to the upstream URL it stands for, and back (for redirects and for the base URLs a wrapped command gets).
 * Pure.
 */
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** One upstream served on the proxy port. */
export interface ReverseMount {
  /** The path prefix `/NAME/` it is served under, or undefined for the mount at `/`. */
  name: string | undefined
  /** Upstream origin, e.g. `https://api.openai.com`. */
  origin: string
  /** Upstream base path, '' or e.g. `/api` (no trailing slash): local `/x` maps to `origin + basePath + /x`. */
  basePath: string
}

const MOUNT_NAME = /^([A-Za-z0-9][A-Za-z0-9._-]{0,63})=(.*)$/

/**
 * Parses `--reverse` values: `URL` (served at `/`, at most one) or `NAME=URL` (served under `/NAME/`).
 * @example parseReverse(['https://api.openai.com', 'anthropic=https://api.anthropic.com'])
 */
export function parseReverse(values: readonly string[]): ReverseMount[] {
  const mounts: ReverseMount[] = []
  for (const value of values) {
    const m = MOUNT_NAME.exec(value)
    const name = m?.[1]
    const raw = m ? (m[2] as string) : value
    let url: URL
    try {
      url = new URL(raw)
    } catch {
      throw invalid(value, 'it is not an absolute URL')
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid(value, `${url.protocol} is not http: or https:`)
    if (url.username || url.password) throw invalid(value, 'credentials in the URL would be recorded; pass them as the client does')
    if (url.search || url.hash) throw invalid(value, 'a mount is an origin plus an optional base path, without query or fragment')
    const mount: ReverseMount = { name, origin: url.origin, basePath: url.pathname.replace(/\/+$/, '') }
    if (mounts.some((o) => o.name === name)) {
      throw invalid(value, name === undefined ? 'only one upstream can be served at / (name the others: NAME=URL)' : `the name "${name}" is used twice`)
    }
    mounts.push(mount)
  }
  return mounts
}

function invalid(value: string, why: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.INVALID_OPTION,
    `Invalid --reverse "${value}": ${why}. Give the upstream's URL (--reverse https://api.openai.com), or NAME=URL to serve it under /NAME/ (--reverse anthropic=https://api.anthropic.com).`,
  )
}

/** The upstream a local request maps to. */
export interface ReverseTarget {
  mount: ReverseMount
  /** The upstream URL the request stands for, e.g. `https://api.openai.com/v1/chat/completions`. */
  url: string
}

/** Maps local request targets to upstream URLs and upstream URLs back to local ones. */
export class ReverseRoutes {
  readonly mounts: readonly ReverseMount[]

  constructor(mounts: readonly ReverseMount[]) {
    this.mounts = mounts
  }

  /**
   * The upstream URL for an origin-form target (`/openai/v1/models?x=1`): a named mount when the first path
   * segment is its name, else the mount at `/`; undefined when neither applies.
   */
  resolve(target: string): ReverseTarget | undefined {
    if (!target.startsWith('/')) return undefined
    const segment = /^\/([^/?#]*)/.exec(target)?.[1] ?? ''
    const named = this.mounts.find((m) => m.name !== undefined && m.name === segment)
    const mount = named ?? this.mounts.find((m) => m.name === undefined)
    if (!mount) return undefined
    const rest = named ? target.slice(1 + segment.length) : target
    const path = rest.startsWith('/') ? `${mount.basePath}${rest}` : `${mount.basePath || '/'}${rest}`
    return { mount, url: `${mount.origin}${path}` }
  }

  /**
   * The local URL (under `localOrigin`, e.g. `http://127.0.0.1:8080`) that stands for an upstream URL, or
   * undefined when no mount serves it. The mount with the longest matching base path wins.
   */
  localize(upstreamUrl: string, localOrigin: string): string | undefined {
    let u: URL
    try {
      u = new URL(upstreamUrl)
    } catch {
      return undefined
    }
    let best: ReverseMount | undefined
    for (const m of this.mounts) {
      if (m.origin !== u.origin) continue
      if (m.basePath !== '' && u.pathname !== m.basePath && !u.pathname.startsWith(`${m.basePath}/`)) continue
      if (!best || m.basePath.length > best.basePath.length) best = m
    }
    if (!best) return undefined
    const rest = u.pathname.slice(best.basePath.length)
    return `${localOrigin}${best.name === undefined ? '' : `/${best.name}`}${rest}${u.search}${u.hash}`
  }

  /** Each mount with its local base URL, e.g. `{ url: 'http://127.0.0.1:8080/anthropic', upstream: 'https://api.anthropic.com' }`. */
  describe(localOrigin: string): Array<{ name: string | null; url: string; upstream: string }> {
    return this.mounts.map((m) => ({
      name: m.name ?? null,
      url: `${localOrigin}${m.name === undefined ? '' : `/${m.name}`}`,
      upstream: `${m.origin}${m.basePath}`,
    }))
  }
}

/**
 * The base URL variables well-known SDKs read, and the upstream base URL each stands for. A wrapped command
 * gets the variable when a mount serves that upstream.
 */
export const KNOWN_BASE_URLS: ReadonlyArray<{ variable: string; upstream: string }> = [
  { variable: 'OPENAI_BASE_URL', upstream: 'https://api.openai.com/v1' },
  { variable: 'ANTHROPIC_BASE_URL', upstream: 'https://api.anthropic.com' },
  // @google/genai reads it for the Gemini API (googleapis/js-genai src/node/node_client.ts).
  { variable: 'GOOGLE_GEMINI_BASE_URL', upstream: 'https://generativelanguage.googleapis.com' },
]

/**
 * What `tr-proxy record|replay --reverse ... -- cmd` adds to the command's environment: TOOL_REPLAY_REVERSE_URL
 * for the mount at `/`, TOOL_REPLAY_REVERSE_URL_<NAME> (upper-cased, other characters `_`) for each named
 * mount, and the SDK variables of KNOWN_BASE_URLS whose upstream a mount serves.
 */
export function reverseEnvironment(routes: ReverseRoutes, localOrigin: string): Record<string, string> {
  const env: Record<string, string> = {}
  for (const m of routes.mounts) {
    if (m.name === undefined) env.TOOL_REPLAY_REVERSE_URL = localOrigin
    else env[`TOOL_REPLAY_REVERSE_URL_${m.name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`] = `${localOrigin}/${m.name}`
  }
  for (const known of KNOWN_BASE_URLS) {
    // Without the slash `new URL()` adds to a bare origin: SDKs join paths onto a base URL themselves.
    const local = routes.localize(known.upstream, localOrigin)?.replace(/\/+$/, '')
    if (local !== undefined) env[known.variable] = local
  }
  return env
}

/**
 * A redirect target as the client should see it: a `Location` that points into a mounted upstream becomes the
 * local URL standing for it (absolute stays absolute, path-absolute stays path-absolute). Relative and
 * unmapped values are left as they are. `requestUrl` is the upstream URL the response answers.
 */
export function localizeLocation(value: string, requestUrl: string, routes: ReverseRoutes, localOrigin: string): string {
  const absolute = /^[A-Za-z][A-Za-z0-9+.-]*:/.test(value) || value.startsWith('//')
  if (!absolute && !value.startsWith('/')) return value
  let target: URL
  try {
    target = new URL(value, requestUrl)
  } catch {
    return value
  }
  const local = routes.localize(target.href, localOrigin)
  if (local === undefined) return value
  return absolute ? local : local.slice(localOrigin.length) || '/'
}
