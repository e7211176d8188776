import assert from 'node:assert/strict'
import { test } from 'node:test'
import { formatAppRun, shellLine } from './app-run.ts'
import { type AppRun, OUTPUT_TAIL_BYTES } from './exchange.ts'
import { appRunProblem, assertValidAppRun } from './validate.ts'

const tail = (text: string) => ({ text, bytes: Buffer.byteLength(text) })
const APP: AppRun = { command: ['node', 'decide.ts'], cwd: '/src', exit: { code: 0, stdout: tail('decision: ok\n'), stderr: tail('') } }

test('a well-formed app outcome has no problem; a fork shape (command only) neither', () => {
  assert.equal(appRunProblem(APP), undefined)
  assert.equal(appRunProblem({ command: ['npm', 'test'] }), undefined)
  assert.equal(appRunProblem({ ...APP, exit: { ...APP.exit, code: 143, signal: 'SIGTERM' } }), undefined)
})

test('each rule names its field', () => {
  const cases: Array<[unknown, string]> = [
    [null, 'meta.app'],
    [{ command: [] }, 'meta.app.command'],
    [{ command: ['a', 3] }, 'meta.app.command[1]'],
    [{ command: ['a\0b'] }, 'meta.app.command[0]'],
    [{ command: ['a'], cwd: '' }, 'meta.app.cwd'],
    [{ command: ['a'], extra: 1 }, 'meta.app.extra'],
    [{ ...APP, exit: { ...APP.exit, code: -1 } }, 'meta.app.exit.code'],
    [{ ...APP, exit: { ...APP.exit, code: 1.5 } }, 'meta.app.exit.code'],
    [{ ...APP, exit: { ...APP.exit, signal: 'kill' } }, 'meta.app.exit.signal'],
    [{ ...APP, exit: { ...APP.exit, stdout: { text: 'x' } } }, 'meta.app.exit.stdout.bytes'],
    [{ ...APP, exit: { ...APP.exit, stderr: { text: 'x'.repeat(2 * OUTPUT_TAIL_BYTES + 1), bytes: 1 } } }, 'meta.app.exit.stderr.text'],
    [{ ...APP, exit: { ...APP.exit, stdout: { ...tail('x'), more: 1 } } }, 'meta.app.exit.stdout.more'],
  ]
  for (const [value, path] of cases) assert.equal(appRunProblem(value)?.path, path, JSON.stringify(value)?.slice(0, 80))
})

test('assertValidAppRun throws TR_TRACE_INVALID naming the trace and the field', () => {
  assert.throws(
    () => assertValidAppRun('t', { command: [] }, { action: 'Cannot store' }),
    (err: { code?: string; message?: string }) =>
      err.code === 'TR_TRACE_INVALID' && /^Cannot store trace "t": meta\.app\.command must be/.test(err.message ?? ''),
  )
})

test('formatAppRun: command as a shell line, exit, tails with their sizes', () => {
  assert.equal(shellLine(['node', '-e', "console.log('hi there')"]), `node -e 'console.log('\\''hi there'\\'')'`)
  const text = formatAppRun({ ...APP, exit: { code: 1, stdout: tail('a\nb\n'), stderr: { text: 'end\n', bytes: 20_000 } } })
  assert.equal(
    text,
    ['app: node decide.ts (in /src) → exit 1', '  stdout: 4 bytes', '    a', '    b', `  stderr: last ${OUTPUT_TAIL_BYTES} of 20000 bytes`, '    end'].join(
      '\n',
    ),
  )
  assert.match(formatAppRun({ command: ['npm', 'test'] }), /not run against this trace yet/)
  assert.match(formatAppRun(APP), /stderr: \(empty\)/)
})
