/** Small text helpers the page shares. */

/** `12.3 kB`. */
export function bytes(n: number): string {
  if (n < 1000) return `${n} B`
  if (n < 1e6) return `${(n / 1e3).toFixed(1)} kB`
  return `${(n / 1e6).toFixed(1)} MB`
}

/** `1.2 s` / `340 ms`. */
export function ms(n: number): string {
  return n >= 1000 ? `${(n / 1000).toFixed(2)} s` : `${Math.round(n)} ms`
}

/** host + path of a URL. */
export function shortUrl(url: string): string {
  try {
    const u = new URL(url)
    return `${u.host}${u.pathname}${u.search}`
  } catch {
    return url
  }
}

/** A string cut to `max` characters. */
export function clip(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max - 1)}…` : s
}

/** A command line as a shell would take it back. */
export function shellLine(argv: readonly string[]): string {
  return argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", `'\\''`)}'`)).join(' ')
}

/** Hash route: path segments and query. */
export function route(): { parts: string[]; query: URLSearchParams } {
  const hash = location.hash.replace(/^#\/?/, '')
  const [path = '', q = ''] = hash.split('?')
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(q) }
}

/** Navigates to a hash route. */
export function go(path: string): void {
  location.hash = path
}
