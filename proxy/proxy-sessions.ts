/**
 * The sessions one proxy serves at once: an optional default session (the one `tr-proxy record|replay|serve
 * --trace` opens) and named sessions opened and closed while it runs (the control API's POST /sessions and
 * DELETE /sessions/NAME). Each is a full engine session: its own trace, mode, strict ledger and arrival order.
 */
import type { Session, SessionSummary } from '../engine/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { assertSessionName, SESSION_HEADER } from './session-choice.ts'

/** A named session and its name. */
export interface NamedSession {
  name: string
  session: Session
}

/** A named session closed because the proxy stopped: its summary, and the error if closing it failed. */
export interface ClosedSession extends NamedSession {
  summary: SessionSummary
  error?: unknown
}

/** A request refused for its session: it named none, a session never opened here, or one already closed. */
export interface SessionRefusal {
  reason: 'unnamed' | 'never-opened' | 'closed'
  session: string | null
  method: string
  url: string
}

/** Requests refused for their session, by reason, with the first few as examples. */
export interface SessionRefusals {
  unnamed: number
  neverOpened: number
  closed: number
  examples: SessionRefusal[]
}

const MAX_REFUSAL_EXAMPLES = 20

/** The default session plus named ones, and the rule that picks a request's session. */
export class ProxySessions {
  /** The session of requests that name none; undefined on a sessions-only proxy. */
  readonly default: Session | undefined
  readonly #named = new Map<string, Session>()
  /** Names being opened (their trace is loading): taken, but not yet serving. */
  readonly #opening = new Set<string>()
  /** Named sessions still open when the proxy closed, with their summaries (see closeAll). */
  readonly #leftOpen: ClosedSession[] = []
  /** Set by closeAll(): a session still loading its trace then is discarded instead of left open unseen. */
  #stopping = false
  /** Every name opened on this proxy, so a refusal can tell a closed session from one never opened. */
  readonly #everOpened = new Set<string>()
  readonly #refusals: SessionRefusals = { unnamed: 0, neverOpened: 0, closed: 0, examples: [] }

  constructor(defaultSession: Session | undefined) {
    this.default = defaultSession
  }

  /**
   * Opens a named session with `open` (called once the name is reserved, so two callers racing for one name
   * cannot both open a session). Throws TR_SESSION_EXISTS when the name is taken.
   */
  async open(name: string, open: () => Promise<Session>): Promise<Session> {
    assertSessionName(name)
    if (this.#named.has(name) || this.#opening.has(name)) {
      throw new ToolReplayError(
        ErrorCodes.SESSION_EXISTS,
        `Failed to open session "${name}": a session of that name is already open on this proxy (a test file that crashed before its end leaves its session open). Close it with \`tr-proxy session close ${name}\` (with the serve's --port and --store; on the control API: DELETE /sessions/${name}), or pick another name.`,
        { details: { session: name } },
      )
    }
    this.#opening.add(name)
    try {
      const session = await open()
      if (this.#stopping) {
        await session.discard().catch(() => {})
        throw new ToolReplayError(
          ErrorCodes.STORE_CLOSED,
          `Failed to open session "${name}": the proxy stopped (and its store closes) while the session was opening. Start a serve and open it there.`,
          { details: { session: name } },
        )
      }
      this.#named.set(name, session)
      this.#everOpened.add(name)
      return session
    } finally {
      this.#opening.delete(name)
    }
  }

  /** The open session of that name. */
  get(name: string): Session | undefined {
    return this.#named.get(name)
  }

  /** Named sessions, by name. */
  list(): NamedSession[] {
    return [...this.#named].map(([name, session]) => ({ name, session })).sort((a, b) => a.name.localeCompare(b.name))
  }

  /**
   * Takes a named session out (requests naming it are refused from now on) and closes it: waits for its
   * in-flight recordings and returns its summary. Throws TR_SESSION_UNKNOWN when no session has that name.
   */
  async close(name: string): Promise<SessionSummary> {
    const session = this.#named.get(name)
    if (!session) throw this.#unknown(name, false)
    this.#named.delete(name)
    return session.close()
  }

  /**
   * The session a request belongs to: the one it names, else the default. A name that is not open, or no
   * name on a proxy without a default session, is a TR_SESSION_UNKNOWN error for the caller to refuse with.
   */
  select(choice: string | undefined): Session | ToolReplayError {
    if (choice === undefined) {
      if (this.default) return this.default
      const open = this.#openNames()
      return new ToolReplayError(
        ErrorCodes.SESSION_UNKNOWN,
        `This Tool Replay proxy has no default session, and the request names none. Name an open session with the ${SESSION_HEADER} header or with proxy credentials (HTTPS_PROXY=http://NAME:x@host:port); open: ${open}.`,
        { details: { session: null } },
      )
    }
    return this.#named.get(choice) ?? this.#unknown(choice, true)
  }

  /**
   * Closes every named session still open (the proxy is stopping) and keeps their summaries for leftOpen();
   * a session whose close fails is reported with the error's summary so the others still close.
   */
  async closeAll(): Promise<ClosedSession[]> {
    this.#stopping = true
    const open = [...this.#named]
    this.#named.clear()
    const closed = await Promise.all(
      open.map(([name, session]) =>
        session.close().then(
          (summary): ClosedSession => ({ name, session, summary }),
          (error: unknown): ClosedSession => ({ name, session, summary: session.summary(), error }),
        ),
      ),
    )
    this.#leftOpen.push(...closed)
    return closed
  }

  /**
   * Notes a request refused for the session it named (or for naming none): counted by why, the first
   * MAX_REFUSAL_EXAMPLES kept with method and URL, for the serve's end report.
   */
  noteRefusal(choice: string | undefined, method: string, url: string): void {
    const reason: SessionRefusal['reason'] = choice === undefined || choice === '' ? 'unnamed' : this.#everOpened.has(choice) ? 'closed' : 'never-opened'
    if (reason === 'unnamed') this.#refusals.unnamed++
    else if (reason === 'closed') this.#refusals.closed++
    else this.#refusals.neverOpened++
    if (this.#refusals.examples.length < MAX_REFUSAL_EXAMPLES) this.#refusals.examples.push({ reason, session: choice ?? null, method, url })
  }

  /** What noteRefusal() saw. */
  refusals(): SessionRefusals {
    return { ...this.#refusals, examples: [...this.#refusals.examples] }
  }

  /** Named sessions that were still open when closeAll() ran, with their summaries. */
  leftOpen(): readonly ClosedSession[] {
    return this.#leftOpen
  }

  #openNames(): string {
    const names = [...this.#named.keys()].sort()
    return names.length === 0 ? 'none (open one with POST /sessions on the control socket)' : names.map((n) => `"${n}"`).join(', ')
  }

  #unknown(name: string, request: boolean): ToolReplayError {
    const why = this.#opening.has(name) ? 'is still being opened' : 'is not open on this proxy'
    const message = request
      ? `The request names session "${name}", which ${why} (open: ${this.#openNames()}). Open it first (POST /sessions on the control socket, or \`tr-proxy session open\`), or fix the name in the ${SESSION_HEADER} header or the proxy URL.`
      : `Failed to close session "${name}": it ${why} (open: ${this.#openNames()}). Check the name with \`tr-proxy session ls\` (GET /sessions).`
    return new ToolReplayError(ErrorCodes.SESSION_UNKNOWN, message, { details: { session: name } })
  }
}
