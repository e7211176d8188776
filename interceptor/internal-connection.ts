/**
 * Connections Tool Replay opens itself while node:http capture is installed: the live requests the capture
 * forwards, and the fetch dispatcher's upstream requests. @mswjs/interceptors patches
 * `net.Socket.prototype.connect` for every socket in the process, so without this they would be parsed
 * again as app traffic (and, in an async context that msw attributes to an app's `http.ClientRequest`,
 * captured a second time).
 *
 * @note The bypass is msw's own: a connect made inside `__MSW_INTERNAL_CONNECTION_CONTEXT.run()` goes
 * straight to the network (`src/interceptors/net/index.ts`, "Internal connections must bypass every
 * socket consumer"); msw uses it for its own passthrough connections. The first connect in the context
 * is the one exempted, so each is wrapped where it is made. Without msw loaded the context does not exist
 * and the call simply runs.
 */
import type { Agent as HttpAgent } from 'node:http'
import https from 'node:https'
import type { Duplex } from 'node:stream'

const http = process.getBuiltinModule('node:http') // not `import`: see trace/patch.ts

interface InternalConnectionContext {
  run<T>(callback: () => T): T
}

const socketPrototype = process.getBuiltinModule('node:net').Socket.prototype
/**
 * Node's own `Socket.prototype.connect`, when that is what this module found at load. Node's is told by its
 * source (lib/net.js names the internal `normalizedArgsSymbol`, which no userland patch can reach); when it
 * cannot be told (a patch came first, or a Node that reads otherwise) this is undefined and every connect
 * runs in the context, as it always did.
 */
const connectAtLoad =
  typeof socketPrototype.connect === 'function' && Function.prototype.toString.call(socketPrototype.connect).includes('normalizedArgsSymbol')
    ? socketPrototype.connect
    : undefined

/**
 * Runs `connect` so the socket it opens is not intercepted by @mswjs/interceptors. Only while something has
 * replaced `Socket.prototype.connect` (msw's socket interceptor, applied by the node:http capture or an app's
 * own msw): the context is an AsyncLocalStorage, and on Node 22 its first `run()` turns promise hooks on for
 * the rest of the process, making every promise the app makes cost about four times as much.
 */
export function runAsInternalConnection<T>(connect: () => T): T {
  const context = (globalThis as { __MSW_INTERNAL_CONNECTION_CONTEXT?: InternalConnectionContext }).__MSW_INTERNAL_CONNECTION_CONTEXT
  return context && socketPrototype.connect !== connectAtLoad ? context.run(connect) : connect()
}

type CreateConnection = (options: object, callback: (err: Error | null, socket: Duplex) => void) => Duplex | undefined

/** Keep-alive agents whose every new socket bypasses the interception: where captured node:http requests go live. */
export interface ForwardAgents {
  http: HttpAgent
  https: https.Agent
  /** Closes every pooled socket. */
  destroy(): void
}

/** Creates the agents the node:http capture forwards through (one pool per TLS option set, as Node keys it). */
export function createForwardAgents(): ForwardAgents {
  const internal = <A extends HttpAgent>(agent: A): A => {
    const create = (agent as unknown as { createConnection: CreateConnection }).createConnection.bind(agent)
    ;(agent as unknown as { createConnection: CreateConnection }).createConnection = (options, callback) =>
      runAsInternalConnection(() => create(options, callback))
    return agent
  }
  const agents = {
    http: internal(new http.Agent({ keepAlive: true })),
    https: internal(new https.Agent({ keepAlive: true })),
  }
  return {
    ...agents,
    destroy() {
      agents.http.destroy()
      agents.https.destroy()
    },
  }
}
