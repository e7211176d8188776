/**
 * The MCP agent example (examples/mcp-agent) recorded into a store for the inspector's browser tests: in a
 * scratch checkout (the example copied, everything else linked to this repository, so its workspace files are
 * written there), `node examples/mcp-agent/run.ts --record --store STORE`: the fake model and the real
 * filesystem and memory MCP servers over stdio, one trace "mcp-agent" of 14 exchanges.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const EXAMPLE = 'examples/mcp-agent'

/** Records the example's run as trace "mcp-agent" in `store`. */
export async function recordMcpAgent(store: string): Promise<void> {
  const checkout = mkdtempSync(join(tmpdir(), 'tr-mcp-agent-'))
  try {
    for (const name of readdirSync(ROOT)) {
      if (['.git', '.tool-replay', '.scratch', 'examples'].includes(name)) continue
      symlinkSync(join(ROOT, name), join(checkout, name))
    }
    mkdirSync(join(checkout, 'examples'))
    cpSync(join(ROOT, EXAMPLE), join(checkout, EXAMPLE), { recursive: true, filter: (src) => !/workspace\/(reply\.txt|memory\.jsonl)$/.test(src) })
    const env = { PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, HOME: process.env.HOME ?? checkout }
    const child = spawn(process.execPath, ['--conditions=tool-replay-source', `${EXAMPLE}/run.ts`, '--record', '--store', store], {
      cwd: checkout,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 180_000,
    })
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c))
    child.stderr.on('data', (c: Buffer) => (out += c))
    const [code] = await once(child, 'close')
    assert.equal(code, 0, out)
    assert.match(out, /recorded trace "mcp-agent" \(14 exchanges\)/)
  } finally {
    rmSync(checkout, { recursive: true, force: true })
  }
}
