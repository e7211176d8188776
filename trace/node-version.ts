/**
 * The library's Node check, run when any entry point is imported (trace/index.ts imports this first; every
 * entry reaches it): on a Node older than package.json's "engines" the library would fail later, inside
 * undici, with a bare `TypeError`. The CLI checks the same in bin/tr-proxy.js before loading anything.
 */

/** The oldest Node the package runs on, as package.json "engines" says (`>=22.19`). */
export const MIN_NODE_VERSION = '22.19'

/**
 * Throws naming the Node in use and the fix when `version` (default: this process's) is older than 22.19.
 * @example
 * assertSupportedNode('20.11.1') // throws: Tool Replay needs Node >= 22.19 (this is v20.11.1) ...
 */
export function assertSupportedNode(version: string = process.versions.node): void {
  const [major = 0, minor = 0] = version.split('.').map(Number)
  const [minMajor, minMinor] = MIN_NODE_VERSION.split('.').map(Number) as [number, number]
  if (major > minMajor || (major === minMajor && minor >= minMinor)) return
  throw new Error(
    `Tool Replay needs Node >= ${MIN_NODE_VERSION} (this is v${version}): its capture builds on undici and Node APIs that older versions lack. Run the app or its tests with Node ${MIN_NODE_VERSION} or later (e.g. \`nvm install 22\`).`,
  )
}

assertSupportedNode()
