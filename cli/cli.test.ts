import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openStore, openStoreOps } from '../store/index.ts'
import { bodyFromBytes, ErrorCodes, type Trace } from '../trace/index.ts'
import { COMMAND_ENTRIES, commandsFor, loadAllCommands } from './commands/index.ts'
import { EXIT_CODES, EXIT_DIFFERENT, EXIT_OK } from './exit-codes.ts'
import { runCli } from './main.ts'

function capture() {
  const out: string[] = []
  const err: string[] = []
  return { io: { out: (t: string) => out.push(t), err: (t: string) => err.push(t) }, out, err }
}

function sampleTrace(name: string): Trace {
  const body = bodyFromBytes(new TextEncoder().encode('{"active":true}'))
  return {
    meta: { name, format: 1 },
    exchanges: [
      {
        seq: 0,
        request: { method: 'GET', url: 'https://crm.test/customers/42', headers: [['accept', 'application/json']], body: null },
        outcome: {
          kind: 'response',
          response: { status: 200, statusText: 'OK', headers: [['content-type', 'application/json']], body: body.ref, trailers: [] },
        },
        timing: { startMs: 0, headersMs: 3 },
      },
    ],
    bodies: new Map([[body.ref.digest, body.bytes]]),
  }
}

describe('tr-proxy CLI (in-process)', () => {
  let dir: string
  let store: string
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tr-cli-'))
    store = join(dir, 'store')
    const s = await openStore(store)
    await s.putTrace(sampleTrace('crm'))
    await s.close()
  })
  after(() => rm(dir, { recursive: true, force: true }))

  test('ls lists traces, as a table and as JSON', async () => {
    const c = capture()
    assert.equal(await runCli(['ls', '--store', store], c.io), 0)
    assert.match(c.out.join('\n'), /^NAME\s+STATUS\s+EXCHANGES\s+CREATED\ncrm\s+complete\s+1\s+/m)
    const j = capture()
    assert.equal(await runCli(['ls', '--store', store, '--json'], j.io), 0)
    const parsed = JSON.parse(j.out.join(''))
    assert.deepEqual(
      parsed.traces.map((t: { name: string; status: string }) => [t.name, t.status]),
      [['crm', 'complete']],
    )
  })

  test('show prints exchanges and one exchange in full', async () => {
    const c = capture()
    assert.equal(await runCli(['show', 'crm', '--store', store], c.io), 0)
    assert.equal(c.out.join('\n'), 'trace "crm": 1 exchange(s)\n#0 GET https://crm.test/customers/42 → 200 OK (15 B, 1 chunk)')
    const full = capture()
    assert.equal(await runCli(['show', 'crm', '--exchange', '0', '--store', store], full.io), 0)
    assert.match(full.out.join('\n'), /< 200 OK\n< content-type: application\/json\n<\n\{"active":true\}/)
  })

  test('unknown trace: TR_TRACE_NOT_FOUND, exit 66, message names what exists', async () => {
    const c = capture()
    assert.equal(await runCli(['show', 'crn', '--store', store], c.io), EXIT_CODES[ErrorCodes.TRACE_NOT_FOUND])
    assert.match(c.err.join('\n'), /error TR_TRACE_NOT_FOUND: Trace "crn" was not found .* Traces there: "crm"\./)
    const j = capture()
    assert.equal(await runCli(['show', 'crn', '--store', store, '--json'], j.io), 66)
    assert.equal(JSON.parse(j.out.join('')).error.code, 'TR_TRACE_NOT_FOUND')
  })

  test('export then import round-trips; a tampered file is refused with exit 65', async () => {
    const file = join(dir, 'crm.trace.json')
    assert.equal(await runCli(['export', 'crm', '--out', file, '--store', store], capture().io), 0)
    const text = await readFile(file, 'utf8')
    const other = join(dir, 'store2')
    assert.equal(await runCli(['import', file, '--store', other], capture().io), 0)
    const again = join(dir, 'again.trace.json')
    assert.equal(await runCli(['export', 'crm', '--out', again, '--store', other], capture().io), 0)
    assert.equal(await readFile(again, 'utf8'), text, 're-export is byte-identical')
    // Importing the same name twice needs --force.
    const dup = capture()
    assert.equal(await runCli(['import', file, '--store', other], dup.io), EXIT_CODES[ErrorCodes.TRACE_EXISTS])
    const tampered = text.replace('\\"active\\":true', '\\"active\\":false')
    assert.notEqual(tampered, text, 'the tamper step changed the file')
    await writeFile(join(dir, 'tampered.trace.json'), tampered)
    const bad = capture()
    assert.equal(await runCli(['import', join(dir, 'tampered.trace.json'), '--store', other], bad.io), 65)
    assert.match(bad.err.join('\n'), /TR_TRACE_(DIGEST_MISMATCH|FILE_INVALID)/)
  })

  test('rm deletes traces; an unknown name deletes nothing and exits 66', async () => {
    const s = await openStore(store)
    await s.putTrace(sampleTrace('tmp-a'))
    await s.putTrace(sampleTrace('tmp-b'))
    await s.close()
    const bad = capture()
    assert.equal(await runCli(['rm', 'tmp-a', 'nope', '--store', store], bad.io), 66)
    assert.match(bad.err.join('\n'), /Nothing deleted: no trace named "nope"/)
    assert.equal(await runCli(['rm', 'tmp-a', 'tmp-b', '--store', store], capture().io), 0)
    const ls = capture()
    await runCli(['ls', '--store', store, '--json'], ls.io)
    assert.deepEqual(
      JSON.parse(ls.out.join('')).traces.map((t: { name: string }) => t.name),
      ['crm'],
    )
  })

  test('a record run that never starts keeps the previous trace (bad port, missing command)', async () => {
    const badPort = capture()
    assert.equal(await runCli(['record', '--trace', 'crm', '--port', '99999', '--store', store, '--', 'true'], badPort.io), 64)
    assert.match(badPort.err.join('\n'), /TR_INVALID_OPTION: Invalid --port 99999/)
    const missing = capture()
    assert.equal(await runCli(['record', '--trace', 'crm', '--store', store, '--', '/nonexistent/command'], missing.io), 74)
    assert.match(missing.err.join('\n'), /TR_COMMAND_FAILED/)
    const show = capture()
    assert.equal(await runCli(['show', 'crm', '--store', store], show.io), 0)
    assert.match(show.out.join('\n'), /^trace "crm": 1 exchange\(s\)/)
  })

  test('usage errors exit 64, point at --help and run nothing', async () => {
    const c = capture()
    assert.equal(await runCli(['frobnicate'], c.io), 64)
    assert.match(c.err.join('\n'), /Run "tr-proxy --help"/)
    // A mistyped flag on a destructive command must not run it.
    const rm = capture()
    assert.equal(await runCli(['rm', 'crm', '--bogus-flag', '--store', store], rm.io), 64)
    assert.deepEqual(rm.out, [])
    const ls = capture()
    assert.equal(await runCli(['ls', '--store', store, '--json'], ls.io), 0)
    assert.ok(
      JSON.parse(ls.out.join('')).traces.some((t: { name: string }) => t.name === 'crm'),
      'crm still there',
    )
    const badChoice = capture()
    assert.equal(await runCli(['record', '--mode', 'replay', '--trace', 'crm', '--store', store, '--', 'true'], badChoice.io), 64)
    assert.match(badChoice.err.join('\n'), /Invalid values/)
    const j = capture()
    assert.equal(await runCli(['ls', '--bogus', '--json', '--store', store], j.io), 64)
    assert.deepEqual(JSON.parse(j.out.join('')).error.code, 'TR_USAGE')
  })

  test('--help works everywhere', async () => {
    const none = capture()
    assert.equal(await runCli([], none.io), 64)
    for (const cmd of ['ls', 'show', 'export', 'import']) {
      const h = capture()
      const stdout: string[] = []
      const write = process.stdout.write
      process.stdout.write = ((chunk: string) => {
        stdout.push(String(chunk))
        return true
      }) as typeof process.stdout.write
      try {
        assert.equal(await runCli([cmd, '--help'], h.io), 0)
      } finally {
        process.stdout.write = write
      }
      assert.match(stdout.join(''), /--store/)
    }
  })

  test('--help texts take their exit codes from the exit-code table', () => {
    // Read from docs/reference.md, which is every command's --help as the CLI prints it (scripts/reference.test.ts
    // renders them all and fails when the file differs): rendering them again here took 0.7 s of the unit run.
    const reference = readFileSync(new URL('../docs/reference.md', import.meta.url), 'utf8')
    const [, commands = ''] = reference.split(/^## Commands$/m)
    const sections = commands.split(/^### tr-proxy /m)
    const texts = new Map<string, string>([['', sections[0] ?? ''], ...sections.slice(1).map((t) => [t.split('\n')[0] ?? '', t] as [string, string])])
    assert.deepEqual(
      [...texts.keys()].slice(1),
      COMMAND_ENTRIES.map((e) => e.names[0]),
      'a --help text for every command',
    )
    const known = new Set([EXIT_OK, EXIT_DIFFERENT, ...Object.values(EXIT_CODES)])
    for (const [name, text] of texts) {
      // Yargs wraps lines: join them so "exit\n   69" still reads as one mention.
      const flat = text.replace(/\s+/g, ' ')
      for (const m of flat.matchAll(/\bexits? (?:with )?(\d+)|\((?:exit )?(\d+)\)/gi)) {
        const code = Number(m[1] ?? m[2])
        assert.ok(known.has(code), `tr-proxy ${name} --help names exit code ${code}, which is not in cli/exit-codes.ts: "${m[0]}"`)
      }
    }
    const flat = (name: string) => (texts.get(name) ?? '').replace(/\s+/g, ' ')
    assert.match(flat('replay'), new RegExp(`Exit ${EXIT_CODES[ErrorCodes.REPLAY_INCOMPLETE]} on any miss`))
    const v = EXIT_CODES
    assert.match(
      flat('verify'),
      new RegExp(
        `integrity \\(exit ${v[ErrorCodes.CASE_INTEGRITY]}\\), strict replay \\(${v[ErrorCodes.REPLAY_INCOMPLETE]}\\), app error \\(${v[ErrorCodes.CASE_APP_ERROR]}\\), behavioural regression \\(${v[ErrorCodes.CASE_REGRESSION]}\\)`,
      ),
    )
  })

  test('a command line loads the command it names, by the names the command itself answers to', async () => {
    const all = await loadAllCommands()
    assert.equal(all.length, COMMAND_ENTRIES.length)
    for (const [i, entry] of COMMAND_ENTRIES.entries()) {
      const own = ([] as string[]).concat((all[i] as { command: string | string[] }).command).map((c) => c.split(' ')[0])
      assert.deepEqual(entry.names, own, `the entry for ${own[0]} lists the names its module declares`)
      for (const name of entry.names) assert.deepEqual(await commandsFor(['--store', 'x', name, '--json']), [all[i]], name)
    }
    // No command named (help, a typo, an option only): every command, so yargs can list or suggest them.
    // An option that is not global before the word: its value may look like a command (`--trace ls replay`).
    for (const argv of [[], ['--help'], ['lss'], ['--store', 'ls'], ['--', 'ls'], ['--trace', 'ls', 'replay'], ['-h', 'ls']])
      assert.equal((await commandsFor(argv)).length, all.length, argv.join(' '))
    assert.deepEqual(await commandsFor(['--store=s', '--no-json', 'show', 't']), await commandsFor(['show']))
    // `--version` alone loads none, and still prints the package's version.
    assert.deepEqual(await commandsFor(['--version']), [])
    const version = spawnSync(process.execPath, [fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url)), '--version'], { encoding: 'utf8' })
    assert.equal(version.status, 0, version.stderr)
    assert.equal(version.stdout.trim(), JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version)
  })

  test('every error code has an exit code', () => {
    for (const code of Object.values(ErrorCodes)) assert.equal(typeof EXIT_CODES[code], 'number', code)
  })

  test('read-only commands never create a store: a missing one is TR_STORE_NOT_FOUND naming the path and --store', async () => {
    const missing = join(dir, 'no-such-store')
    for (const argv of [
      ['ls'],
      ['show', 'x'],
      ['export', 'x', '--out', join(dir, 'x.json')],
      ['diff', 'a', 'b'],
      ['rm', 'x'],
      ['fork', 'x', '--to', 'y', '--patch', '#0 status=500'],
      ['drift', 'x'],
      ['assets', 'push', 'x', '--remote', join(dir, 'assets.git'), '--pointer', join(dir, 'no-pointer.json'), '--cache', join(dir, 'cache')],
    ]) {
      const c = capture()
      assert.equal(await runCli([...argv, '--store', missing], c.io), EXIT_CODES[ErrorCodes.STORE_NOT_FOUND], argv.join(' '))
      assert.match(c.err.join('\n'), new RegExp(`TR_STORE_NOT_FOUND: There is no trace store at ${missing.replace(/[/.]/g, '\\$&')}.*--store`))
      await assert.rejects(readFile(join(missing, 'CURRENT')), 'nothing was created')
    }
    await assert.rejects(
      import('node:fs/promises').then((fs) => fs.stat(missing)),
      'not even the directory',
    )
  })

  test('a store whose CURRENT file is gone is TR_STORE_CORRUPT for every command, and no file is touched', async () => {
    const damaged = join(dir, 'damaged')
    const s = await openStore(damaged)
    for (const name of ['a', 'b', 'c', 'd']) await s.putTrace(sampleTrace(name))
    await s.close()
    await rm(join(damaged, 'CURRENT'))
    const before = await snapshot(damaged)
    // At once: each open waits a second to see that the damage stays (another process may be creating the store).
    const commands = [['ls'], ['show', 'a'], ['record', '--trace', 'x', '--', 'true']]
    const runs = await Promise.all(
      commands.map(async (argv) => {
        const c = capture()
        return { argv, code: await runCli(['--store', damaged, ...argv], c.io), err: c.err.join('\n') }
      }),
    )
    for (const { argv, code, err } of runs) {
      assert.equal(code, EXIT_CODES[ErrorCodes.STORE_CORRUPT], argv.join(' '))
      assert.match(err, /TR_STORE_CORRUPT: .*no CURRENT file.*Nothing was changed/)
    }
    assert.deepEqual(await snapshot(damaged), before, 'every file is exactly as it was')
  })
})

describe('partial recordings', () => {
  test('ls tells recording (its process lives) from partial (it died); show, export and rm take --partial', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tr-cli-partial-'))
    const store = join(dir, 'store')
    const { ops, close } = await openStoreOps(store)
    const x = sampleTrace('x')
    const exchange = x.exchanges[0] as Trace['exchanges'][number]
    // A recording whose process is gone (a pid that cannot exist) and one whose process is this one.
    await ops.beginTrace('dead-1', { name: 'crash', format: 1 }, '2026-01-01T00:00:00.000Z', { pid: 2 ** 30, host: hostname() })
    await ops.append('dead-1', exchange, x.bodies, new Map())
    await ops.beginTrace('live-1', { name: 'busy', format: 1 }, '2026-01-01T00:00:01.000Z', { pid: process.pid, host: hostname() })
    await close()
    const ls = capture()
    assert.equal(await runCli(['ls', '--store', store, '--json'], ls.io), 0)
    assert.deepEqual(
      JSON.parse(ls.out.join('')).traces.map((t: { name: string; status: string }) => [t.name, t.status]),
      [
        ['busy', 'recording'],
        ['crash', 'partial'],
      ],
    )
    const plain = capture()
    assert.equal(await runCli(['show', 'crash', '--store', store], plain.io), EXIT_CODES[ErrorCodes.TRACE_NOT_FOUND])
    assert.match(plain.err.join('\n'), /1 recording\(s\) that did not complete: add --partial/)
    const show = capture()
    assert.equal(await runCli(['show', 'crash', '--partial', '--store', store], show.io), 0, show.err.join('\n'))
    assert.match(show.out.join('\n'), /crm\.test\/customers\/42/)
    const file = join(dir, 'crash.trace.json')
    assert.equal(await runCli(['export', 'crash', '--partial', '--out', file, '--store', store], capture().io), 0)
    assert.match(await readFile(file, 'utf8'), /"partial": "true"/)
    const rm1 = capture()
    assert.equal(
      await runCli(['rm', 'busy', '--partial', '--store', store], rm1.io),
      EXIT_CODES[ErrorCodes.TRACE_NOT_FOUND],
      'a live recording is never removed',
    )
    assert.equal(await runCli(['rm', 'crash', '--partial', '--store', store], capture().io), 0)
    const after = capture()
    assert.equal(await runCli(['ls', '--store', store, '--json'], after.io), 0)
    assert.deepEqual(
      JSON.parse(after.out.join('')).traces.map((t: { name: string }) => t.name),
      ['busy'],
    )
    await rm(dir, { recursive: true, force: true })
  })
})

/** Every file under a directory with its bytes (hex digest), for before/after comparisons. */
async function snapshot(root: string): Promise<Record<string, string>> {
  const { readdir } = await import('node:fs/promises')
  const { createHash } = await import('node:crypto')
  const out: Record<string, string> = {}
  for (const name of (await readdir(root)).sort()) {
    if (name === 'LOCK' || name.endsWith('.sock')) continue
    const bytes = await readFile(join(root, name)).catch(() => undefined)
    if (bytes) out[name] = createHash('sha256').update(bytes).digest('hex')
  }
  return out
}
