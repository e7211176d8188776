/** The page's side of the inspector API: every call carries the token in a header (the guard needs it on POST). */

/** The token this page was opened with (`?token=` in its URL). */
export const TOKEN = new URLSearchParams(location.search).get('token') ?? ''

/** A typed error from the API: its code, message and details. */
export class ApiError extends Error {
  readonly code: string
  readonly details: Record<string, unknown>
  constructor(code: string, message: string, details: Record<string, unknown> = {}) {
    super(message)
    this.code = code
    this.details = details
  }
}

async function call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    headers: { 'x-tool-replay-token': TOKEN, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  const json = (await res.json()) as { ok: boolean; error?: { code: string; message: string; details?: Record<string, unknown> } }
  if (!json.ok) throw new ApiError(json.error?.code ?? 'TR_INTERNAL', json.error?.message ?? res.statusText, json.error?.details ?? {})
  return json as T
}

/** GET /api/... */
export const get = <T>(path: string) => call<T>('GET', path)
/** POST /api/... with a JSON body. */
export const post = <T>(path: string, body: unknown) => call<T>('POST', path, body)
/** An event stream URL (EventSource cannot send headers: the token goes in the query). */
export const eventsUrl = (path: string) => `${path}${path.includes('?') ? '&' : '?'}token=${encodeURIComponent(TOKEN)}`
/** A trace name as a path segment. */
export const seg = (name: string) => encodeURIComponent(name)
