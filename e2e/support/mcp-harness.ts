/**
 * MCP clients for e2e tests: the real SDK `Client` over the real `StdioClientTransport`, whose server
 * command is `tr-proxy mcp -- <server>` as a user would configure it. The wrapper's exit code and stderr are
 * kept for assertions.
 */
import type { ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Client, type ClientOptions } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'

/** The CLI entry a user's MCP config points at. */
export const TR_PROXY = fileURLToPath(new URL('../../bin/tr-proxy.js', import.meta.url))
const NODE_MODULES = fileURLToPath(new URL('../../node_modules/', import.meta.url))
const FIXTURES = fileURLToPath(new URL('../fixtures/mcp/', import.meta.url))

/** The entry file of an npm MCP server installed as a devDependency (no npx download at test time). */
export function npmServer(name: 'server-filesystem' | 'server-memory' | 'server-everything'): string {
  return join(NODE_MODULES, '@modelcontextprotocol', name, 'dist', 'index.js')
}

/** A fixture server of this suite. */
export function fixtureServer(file: string): string {
  return join(FIXTURES, file)
}

/** A command that starts `entry` after appending its pid to `spawnLog` (see fixtures/mcp/marked-server.mjs). */
export function markedServer(spawnLog: string, entry: string, ...args: string[]): string[] {
  return [process.execPath, join(FIXTURES, 'marked-server.mjs'), spawnLog, entry, ...args]
}

/** The pids a spawn log holds (none when the file does not exist). */
export function spawnsIn(spawnLog: string): string[] {
  try {
    return readFileSync(spawnLog, 'utf8').split('\n').filter(Boolean)
  } catch {
    return []
  }
}

/** A temp directory removed after the test. */
export function tempDir(t: { after(fn: () => void): void }, prefix = 'tr-mcp-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A connected client and what the wrapper process did. */
export interface WrappedClient {
  client: Client
  transport: StdioClientTransport
  /** Everything written on the wrapper's stderr so far (the server's stderr and Tool Replay's lines). */
  stderr(): string
  /** Every message the client's transport received, in order: a method, or "answer ID" (the wire, before the SDK dispatches). */
  wire: string[]
  /** The wrapper's exit code (128 + n for a signal). */
  exited: Promise<number | null>
}

/** Options for `connectWrapped`. */
export interface WrapOptions {
  store: string
  mode: 'record' | 'replay' | 'passthrough'
  trace: string
  server: string[]
  name?: string
  /** More flags for `tr-proxy mcp` (before `--`), e.g. ['--faults', file]. */
  flags?: string[]
  /** Extra environment for the wrapper (the SDK passes only a safe default set otherwise). */
  env?: Record<string, string>
  client?: ClientOptions
  /** Runs before connect (request handlers for sampling, roots, ...). */
  setup?: (client: Client) => void
}

/** Starts `tr-proxy mcp -- <server>` through the SDK's stdio transport and connects a client. */
export async function connectWrapped(o: WrapOptions): Promise<WrappedClient> {
  const args = [
    TR_PROXY,
    'mcp',
    '--store',
    o.store,
    '--mode',
    o.mode,
    '--trace',
    o.trace,
    ...(o.name ? ['--name', o.name] : []),
    ...(o.flags ?? []),
    '--',
    ...o.server,
  ]
  const transport = new StdioClientTransport({ command: process.execPath, args, stderr: 'pipe', env: { PATH: process.env.PATH ?? '', ...o.env } })
  let err = ''
  transport.stderr?.on('data', (d: Buffer) => {
    err += d.toString('utf8')
  })
  const client = new Client({ name: 'e2e', version: '1.0.0' }, o.client)
  o.setup?.(client)
  await client.connect(transport)
  // Logged before the SDK dispatches: it handles notifications a turn later than answers, so what its callbacks
  // see of two messages that arrived in one read depends on timing; the wire order does not.
  const wire: string[] = []
  const dispatch = transport.onmessage
  transport.onmessage = (m: JSONRPCMessage) => {
    const o = m as { method?: string; id?: unknown; params?: { progress?: unknown } }
    wire.push(o.method ? `${o.method}${o.params?.progress !== undefined ? ` ${String(o.params.progress)}` : ''}` : `answer ${String(o.id)}`)
    dispatch?.call(transport, m)
  }
  // The SDK keeps the child private; its exit code is what a crash replays as.
  const child = (transport as unknown as { _process?: ChildProcess })._process as ChildProcess
  const exited = new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode)
    else child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 + 9 : null)))
  })
  return { client, transport, stderr: () => err, wire, exited }
}
