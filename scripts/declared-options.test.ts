/**
 * Each option is declared once (trace/option-declaration.ts) and the CLI reads its flags from the declarations:
 * a command that declares a declared flag inline again, or two declarations of one flag, fail here.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { yargsOption } from '../cli/declared-options.ts'
import { SESSION_OPTIONS } from '../engine/index.ts'
import { PROXY_LIMITS } from '../proxy/index.ts'
import { OPTION_SECTIONS } from './reference.ts'

const CLI = fileURLToPath(new URL('../cli/', import.meta.url))

/**
 * Inline flags that share a declared flag's name but are other options: the port and host of a running proxy
 * (`env`, `session`) or of the inspector, and the lab's scenario seed (`demo`: no $TOOL_REPLAY_FAULTS_SEED).
 */
const OTHER_OPTIONS: Record<string, readonly string[]> = {
  port: ['commands/env.ts', 'commands/session.ts', 'commands/inspect.ts'],
  host: ['commands/env.ts', 'commands/inspect.ts'],
  seed: ['commands/demo.ts'],
}

function cliSources(dir = CLI, rel = ''): Array<{ file: string; text: string }> {
  const out: Array<{ file: string; text: string }> = []
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) out.push(...cliSources(join(dir, e.name), `${rel}${e.name}/`))
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) out.push({ file: `${rel}${e.name}`, text: readFileSync(join(dir, e.name), 'utf8') })
  }
  return out
}

const declaredFlags = () => OPTION_SECTIONS.flatMap((s) => Object.values(s.table).map((d) => d.flag))

test('no two declarations share a flag', () => {
  const flags = declaredFlags()
  assert.deepEqual(
    flags.filter((f, i) => flags.indexOf(f) !== i),
    [],
  )
})

test('no command declares a declared flag inline again (it reads it from the declaration)', () => {
  const flags = new Set(declaredFlags())
  const inline: string[] = []
  for (const { file, text } of cliSources()) {
    for (const m of text.matchAll(/\.option\(\s*'([a-z0-9-]+)'/g)) {
      const flag = m[1] as string
      if (flags.has(flag) && !OTHER_OPTIONS[flag]?.includes(file)) inline.push(`${file}: --${flag}`)
    }
  }
  assert.deepEqual(inline, [], 'declare these through declareOptions(y, TABLE) (cli/declared-options.ts)')
})

test('a flag is the declaration: help, choices and default; a command narrows only its default and choices', () => {
  assert.deepEqual(yargsOption(SESSION_OPTIONS.tail), {
    describe: SESSION_OPTIONS.tail.help,
    choices: ['strict', 'live'],
    default: 'strict',
  })
  const mode = yargsOption(SESSION_OPTIONS.mode, { choices: ['record', 'update'], default: 'record' })
  assert.deepEqual([mode.choices, mode.default, mode.describe], [['record', 'update'], 'record', SESSION_OPTIONS.mode.help])
  // With a unit the default is in the help and left to the library: not given stays not given.
  const limit = yargsOption(PROXY_LIMITS.maxConnections)
  assert.equal(limit.default, undefined)
  assert.match(String(limit.describe), /\(connections; default 512\)$/)
  assert.deepEqual(yargsOption(SESSION_OPTIONS.trace, { default: undefined, note: 'from $X' }), {
    describe: 'Trace name; from $X',
    type: 'string',
    alias: 't',
  })
})
