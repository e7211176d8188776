/** The inspector: a local web page over the store (runs, timelines, exchanges, compare, fork, rerun, lab). */

/** The header the page sends its token in. */
export { TOKEN_HEADER } from './guard.ts'
export type { Inspector, InspectorOptions } from './server.ts'
/** Starts the inspector's server (the page and its JSON API) on a loopback port. */
export { startInspector } from './server.ts'
