import assert from 'node:assert/strict'
import { test } from 'node:test'
import { outputMatches, readmeCommands } from './readme-commands.ts'

const README = [
  'Some prose.',
  '',
  '```sh',
  '# 1. Prose: not a command.',
  '#    Still prose (four spaces, but no command above it).',
  'node a.js --flag \\',
  '  --more',
  '#   first line',
  '#',
  '#   third line',
  '',
  '# 2. More prose.',
  'mv x y',
  '```',
  '',
  '```ts',
  'const notShell = 1',
  '```',
  '```sh',
  'echo hi; echo "exit $?"',
  '#   hi',
  '#   exit 0',
  '```',
].join('\n')

test('readmeCommands: commands, continuations, output lines and prose', () => {
  assert.deepEqual(readmeCommands(README), [
    { command: 'node a.js --flag --more', expected: ['first line', '', 'third line'] },
    { command: 'mv x y', expected: [] },
    { command: 'echo hi; echo "exit $?"', expected: ['hi', 'exit 0'] },
  ])
})

test('readmeCommands: an output line must use the "#   " prefix', () => {
  assert.throws(() => readmeCommands('```sh\nnode a.js\n#  two spaces\n```\n'), /must start with "# {3}"/)
})

test('outputMatches: exact lines, … elides within a line, run-to-run ids normalised, counts must agree', () => {
  assert.ok(outputMatches(['a', 'Emitted to …/cases/x (ok)'], ['a', 'Emitted to /tmp/abc/cases/x (ok)']))
  assert.ok(outputMatches(['patch 75f4489e1604 on b'], ['patch 0123456789ab on b']))
  assert.ok(outputMatches(['"Blender BX…"'], ['"Blender BX…"']))
  assert.equal(outputMatches(['a'], ['a', 'b']), false)
  assert.equal(outputMatches(['decision: approved'], ['decision: manual_review']), false)
  assert.equal(outputMatches(['x … y'], ['x … z']), false)
})
