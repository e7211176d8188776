/**
 * Which requests a fault rule, an effect rule or a contract is about: a method and a URL pattern, or a host.
 *
 * URL patterns are globs or regular expressions:
 * - `/shipments/*` (starts with "/"): matched against the path;
 * - `https://api.test/v1/**` or `**` + `/shipments` (a scheme, or a leading `*`): against scheme://host[:port]/path;
 * - either form is matched with the query too when the pattern contains `?`;
 * - `*` matches within one path segment, `**` across segments; everything else is literal;
 * - `/regex/flags`: a JavaScript regular expression tested (unanchored) against the whole URL; it needs a flag
 *   or one of \ ^ $ ( ) [ ] | + { }, since `/v1/models/` is a path.
 * Hosts are `api.openai.com`, `*.openai.com` (one label) or `127.0.0.1:8080` (with a port).
 * MCP targets name what an MCP stdio exchange is about (trace/mcp-wire.ts): `{ mcp: { tool: write_file } }`,
 * optionally `server` and `method` (default tools/call when a tool is named); `*` is a wildcard in each.
 */
import { parseMcpStdioUrl } from '../trace/index.ts'

/** A target as written in a rules file. */
export type TargetSpec =
  | { method?: string | string[]; url: string }
  | { method?: string | string[]; host: string }
  | { mcp: { tool?: string; server?: string; method?: string } }

/** A compiled target: tests a request in microseconds, and reads back as the text that was written. */
export interface Target {
  readonly spec: TargetSpec
  /** e.g. `POST **\/shipments` or `host api.openai.com`. */
  readonly label: string
  matches(method: string, url: string): boolean
}

/** Thrown by `compileTarget` for a pattern it cannot read; the rules validator turns it into TR_INVALID_FAULTS. */
export class TargetSyntaxError extends Error {}

/** Compiles a target; throws TargetSyntaxError naming what is wrong. */
export function compileTarget(spec: TargetSpec): Target {
  if ('mcp' in spec) return compileMcpTarget(spec)
  const methods = methodSet(spec.method)
  const methodLabel = methods ? [...methods].join('|') : '*'
  if ('url' in spec) {
    const test = compileUrlPattern(spec.url)
    return {
      spec,
      label: `${methodLabel} ${spec.url}`,
      matches: (method, url) => (methods === undefined || methods.has(method.toUpperCase())) && test(url),
    }
  }
  const test = compileHostPattern(spec.host)
  return {
    spec,
    label: `${methods ? `${methodLabel} ` : ''}host ${spec.host}`,
    matches: (method, url) => (methods === undefined || methods.has(method.toUpperCase())) && test(url),
  }
}

function compileMcpTarget(spec: Extract<TargetSpec, { mcp: unknown }>): Target {
  const { tool, server, method } = spec.mcp
  if (tool === undefined && server === undefined && method === undefined) throw new TargetSyntaxError('mcp needs a tool, a server or a method')
  const word = (v: string | undefined, what: string) => {
    if (v === undefined) return () => true
    if (v.trim() === '' || /\s/.test(v)) throw new TargetSyntaxError(`mcp.${what} "${v}" must be a name without spaces (* is a wildcard)`)
    const re = new RegExp(`^${v.split('*').map(escapeRegExp).join('.*')}$`)
    return (x: string | undefined) => x !== undefined && re.test(x)
  }
  const toolOk = word(tool, 'tool')
  const serverOk = word(server, 'server')
  const methodOk = word(method ?? (tool !== undefined ? 'tools/call' : undefined), 'method')
  const parts = [server !== undefined ? `server ${server}` : '', tool !== undefined ? `tool ${tool}` : '', method !== undefined ? `method ${method}` : '']
  return {
    spec,
    label: `mcp ${parts.filter(Boolean).join(' ')}`,
    matches: (_method, url) => {
      const t = parseMcpStdioUrl(url)
      return t !== undefined && t.kind === 'message' && serverOk(t.server) && methodOk(t.method) && (tool === undefined || toolOk(t.tool))
    },
  }
}

function methodSet(method: string | string[] | undefined): Set<string> | undefined {
  if (method === undefined) return undefined
  const list = (Array.isArray(method) ? method : [method]).map((m) => m.trim().toUpperCase())
  if (list.length === 0) throw new TargetSyntaxError('method must name at least one method')
  for (const m of list) if (!/^[A-Z]+$|^\*$/.test(m)) throw new TargetSyntaxError(`method "${m}" is not an HTTP method`)
  return list.includes('*') ? undefined : new Set(list)
}

function compileUrlPattern(pattern: string): (url: string) => boolean {
  const regex = /^\/(.+)\/([dgimsuvy]*)$/s.exec(pattern)
  // "/v1/models/" is a path with a trailing slash, not a regex: a regex needs a flag or a regex character.
  if (regex && !pattern.startsWith('//') && (regex[2] !== '' || /[\\^$()[\]|+{}]/.test(regex[1] as string))) {
    let re: RegExp
    try {
      // Global and sticky regexes keep state between tests; a matcher must not.
      re = new RegExp(regex[1] as string, (regex[2] as string).replace(/[gy]/g, ''))
    } catch (err) {
      throw new TargetSyntaxError(`url ${pattern} is not a valid regular expression (${(err as Error).message})`)
    }
    return (url) => re.test(url)
  }
  if (pattern === '') throw new TargetSyntaxError('url must not be empty')
  const withQuery = pattern.includes('?')
  if (pattern.startsWith('/')) {
    const re = globToRegExp(pattern)
    return (url) => {
      const u = parseUrl(url)
      return u !== undefined && re.test(u.pathname + (withQuery ? u.search : ''))
    }
  }
  if (pattern.startsWith('*') || /^[a-z][a-z0-9+.-]*:\/\//i.test(pattern)) {
    const re = globToRegExp(
      pattern.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/]*)/i, (_, scheme: string, host: string) => scheme.toLowerCase() + host.toLowerCase()),
    )
    return (url) => {
      const u = parseUrl(url)
      return u !== undefined && re.test(`${u.protocol}//${u.host}${u.pathname}${withQuery ? u.search : ''}`)
    }
  }
  throw new TargetSyntaxError(`url "${pattern}" must start with "/" (a path), a scheme ("https://..."), "*" (any origin) or be a /regex/`)
}

function compileHostPattern(pattern: string): (url: string) => boolean {
  const host = pattern.trim().toLowerCase()
  if (host === '' || /[/\s]/.test(host)) throw new TargetSyntaxError(`host "${pattern}" must be a host name, optionally with *. and :port (no scheme or path)`)
  const re = new RegExp(`^${host.split('*').map(escapeRegExp).join('[^.:]*')}$`)
  const withPort = /:\d+$/.test(host)
  return (url) => {
    const u = parseUrl(url)
    return u !== undefined && re.test(withPort ? hostWithPort(u) : u.hostname)
  }
}

function hostWithPort(u: URL): string {
  const port = u.port || (u.protocol === 'https:' ? '443' : u.protocol === 'http:' ? '80' : '')
  return `${u.hostname}:${port}`
}

function globToRegExp(glob: string): RegExp {
  let out = ''
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i] as string
    if (ch === '*' && glob[i + 1] === '*') {
      out += '.*'
      i++
    } else if (ch === '*') out += '[^/]*'
    else out += escapeRegExp(ch)
  }
  return new RegExp(`^${out}$`)
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
}

function parseUrl(url: string): URL | undefined {
  try {
    return new URL(url)
  } catch {
    return undefined
  }
}
