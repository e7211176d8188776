/**
 * Read-only and replay commands never create a store: a `--store` that names nothing (a typo) is
 * TR_STORE_NOT_FOUND naming the directory, and the directory is still absent afterwards.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { ErrorCodes } from '../trace/index.ts'
import { EXIT_CODES } from './exit-codes.ts'
import { runCli } from './main.ts'

const dir = mkdtempSync(join(tmpdir(), 'tr-store-typo-'))
after(() => rmSync(dir, { recursive: true, force: true }))

const COMMANDS: Array<[string, string[]]> = [
  ['replay -- cmd', ['replay', '--strict', '--', 'true']],
  ['mcp --mode replay', ['mcp', '--mode', 'replay', '--', 'true']],
  ['ls', ['ls']],
  ['show', ['show', 'checkout']],
  ['export', ['export', 'checkout', '--out', join(dir, 'x.trace.json')]],
  ['du', ['du']],
]

for (const [name, argv] of COMMANDS) {
  test(`tr-proxy ${name} with --store naming no store: TR_STORE_NOT_FOUND, nothing created`, async () => {
    const typo = join(dir, `stroe-${name.replace(/\W+/g, '-')}`)
    const err: string[] = []
    const code = await runCli(
      [
        ...argv.slice(0, argv.indexOf('--') === -1 ? argv.length : argv.indexOf('--')),
        '--store',
        typo,
        ...(argv.includes('--') ? argv.slice(argv.indexOf('--')) : []),
      ],
      {
        out: () => {},
        err: (t: string) => err.push(t),
      },
    )
    assert.equal(code, EXIT_CODES[ErrorCodes.STORE_NOT_FOUND], err.join('\n'))
    assert.match(err.join('\n'), new RegExp(`TR_STORE_NOT_FOUND: There is no trace store at ${typo.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`))
    assert.equal(existsSync(typo), false, `${typo} was created`)
  })
}
