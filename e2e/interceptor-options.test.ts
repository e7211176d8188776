/**
 * install()'s declared options are checked by their declarations, as their flags are: a bad value is the
 * TR_INVALID_OPTION the command line gives for it (the same reason and fix), naming the option as code spells
 * it, and it fails before a store is opened or a global is touched.
 */
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { type InstallOptions, install } from 'tool-replay/interceptor'
import { getGlobalDispatcher } from 'undici'
// Not public API: the declarations, to ask what the command line says of the same value.
import { PACE_OPTION } from '../capture/index.ts'
import { REDACTION_OPTIONS, SESSION_OPTIONS } from '../engine/index.ts'
import { IDENTITY_OPTIONS, isToolReplayError, type OptionTable, optionsFromFlags } from '../trace/index.ts'

let dir: string
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tr-install-options-'))
})
after(() => rm(dir, { recursive: true, force: true }))

/** What the command line says of `value` for the option `key` of `table`, with the flag as code spells the option. */
function cliMessage(table: OptionTable, key: string, value: unknown, name: string): string {
  const d = table[key]
  assert.ok(d, key)
  try {
    optionsFromFlags(table, { [d.flag]: value })
  } catch (err) {
    assert.ok(isToolReplayError(err, 'TR_INVALID_OPTION'), String(err))
    return err.message.replace(`--${d.flag}`, name)
  }
  assert.fail(`--${d.flag} ${JSON.stringify(value)} was accepted`)
}

const CASES: Array<{ given: Partial<InstallOptions>; name: string; table: OptionTable; key: string; value: unknown }> = [
  { given: { mode: 'rewind' as never }, name: 'mode', table: SESSION_OPTIONS, key: 'mode', value: 'rewind' },
  { given: { tail: 'sometimes' as never }, name: 'tail', table: SESSION_OPTIONS, key: 'tail', value: 'sometimes' },
  { given: { keepUnused: 'yes' as never }, name: 'keepUnused', table: SESSION_OPTIONS, key: 'keepUnused', value: 'yes' },
  { given: { maxBodyBytes: 0 }, name: 'maxBodyBytes', table: SESSION_OPTIONS, key: 'maxBodyBytes', value: 0 },
  { given: { durability: 'sometimes' as never }, name: 'durability', table: SESSION_OPTIONS, key: 'durability', value: 'sometimes' },
  { given: { pace: 'bogus' as never }, name: 'pace', table: { pace: PACE_OPTION }, key: 'pace', value: 'bogus' },
  // A string where a list belongs was spread into one-letter header names.
  { given: { redaction: { headers: 'x-token' as never } }, name: 'redaction.headers', table: REDACTION_OPTIONS, key: 'headers', value: 'x-token' },
  {
    given: { identity: { ignoreQueryParams: 'cb' as never } },
    name: 'identity.ignoreQueryParams',
    table: IDENTITY_OPTIONS,
    key: 'ignoreQueryParams',
    value: 'cb',
  },
]

test('a bad declared option is the TR_INVALID_OPTION its flag gives, naming the option; no store opened, no global touched', async () => {
  const storeDir = join(dir, 'never-opened')
  const saved = process.env.TOOL_REPLAY_STORE
  process.env.TOOL_REPLAY_STORE = storeDir
  const dispatcher = getGlobalDispatcher()
  try {
    for (const c of CASES) {
      const expected = cliMessage(c.table, c.key, c.value, c.name)
      assert.ok(expected.startsWith(`Invalid ${c.name} `), expected)
      await assert.rejects(
        install({ trace: 'options', config: false, ...c.given }),
        (err: unknown) => isToolReplayError(err, 'TR_INVALID_OPTION') && err.message === expected,
        `install({ ${c.name} }) should fail with: ${expected}`,
      )
    }
    // Not a flag (startProxy's and the dispatchers' option too), checked all the same.
    await assert.rejects(install({ trace: 'options', config: false, drainAfterAbortMs: -1 }), {
      code: 'TR_INVALID_OPTION',
      message: /^Invalid drainAfterAbortMs -1: give a number of milliseconds >= 0 \(default 1000; 0 records the abort\)\.$/,
    })
  } finally {
    if (saved === undefined) delete process.env.TOOL_REPLAY_STORE
    else process.env.TOOL_REPLAY_STORE = saved
  }
  assert.equal(existsSync(storeDir), false, 'a store was opened before the options were checked')
  assert.equal(getGlobalDispatcher(), dispatcher, 'the global dispatcher was replaced')
})
