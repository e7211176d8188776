import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import { OUTPUT_TAIL_BYTES } from '../trace/index.ts'
import { runCommand, TailBuffer } from './command-wrapper.ts'

test('TailBuffer keeps the last OUTPUT_TAIL_BYTES, starting at a character boundary, and counts every byte', () => {
  const t = new TailBuffer()
  for (let i = 0; i < 100; i++) t.push(Buffer.from('é'.repeat(1000)))
  const { tail, bytes } = t.captured()
  assert.equal(bytes, 200_000)
  assert.ok(tail.byteLength <= OUTPUT_TAIL_BYTES && tail.byteLength >= OUTPUT_TAIL_BYTES - 1)
  assert.ok(/^é+$/.test(Buffer.from(tail).toString('utf8')))
})

test('runCommand passes output through and keeps its tail, in the directory asked for', async () => {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  let seen = ''
  stdout.on('data', (c: Buffer) => (seen += c))
  stderr.resume()
  const exit = await runCommand(
    process.execPath,
    ['-e', 'console.log(process.cwd()); console.error("oops"); process.exit(4)'],
    {},
    { cwd: '/tmp', output: { stdout, stderr } },
  )
  assert.equal(exit.code, 4)
  assert.equal(seen, '/tmp\n')
  assert.equal(Buffer.from(exit.stdout.tail).toString(), '/tmp\n')
  assert.equal(Buffer.from(exit.stderr.tail).toString(), 'oops\n')
})
