import assert from 'node:assert/strict'
import { test } from 'node:test'
import { headingAnchors, headingSlug, markdownLinks, runnableBlocks } from './markdown-docs.ts'
import { outputContains } from './readme-commands.ts'

const PAGE = [
  '# Tool Replay',
  'See [the proxy](docs/proxy.md#reverse-mode) and ![a shot](docs/images/x.png "title").',
  'Not a link: `[x](nowhere.md)`.',
  '```sh runnable',
  'echo "[y](inside-a-block.md)"',
  '#   [y](inside-a-block.md)',
  '```',
  '## Any language, any client: the proxy',
  '## Set up',
  '## Set up',
  '```ts',
  '# not a heading',
  '```',
].join('\n')

test('markdownLinks: links and images outside code, with their lines', () => {
  assert.deepEqual(markdownLinks(PAGE), [
    { target: 'docs/proxy.md#reverse-mode', line: 2 },
    { target: 'docs/images/x.png', line: 2 },
  ])
})

test('headingSlug and headingAnchors: GitHub anchors, repeats numbered, nothing read inside code blocks', () => {
  assert.equal(headingSlug('Any language, any client: the proxy'), 'any-language-any-client-the-proxy')
  assert.equal(headingSlug('Reverse mode: a base URL — not a proxy'), 'reverse-mode-a-base-url--not-a-proxy')
  assert.equal(headingSlug('`tr-proxy import` and trace_files'), 'tr-proxy-import-and-trace_files')
  assert.deepEqual([...headingAnchors(PAGE)], ['tool-replay', 'any-language-any-client-the-proxy', 'set-up', 'set-up-1'])
})

test('runnableBlocks: only blocks marked runnable, with the line of their fence', () => {
  assert.deepEqual(runnableBlocks(PAGE), [{ text: 'echo "[y](inside-a-block.md)"\n#   [y](inside-a-block.md)', line: 4 }])
  assert.throws(() => runnableBlocks('```sh runnable\necho never closed\n'), /never closed/)
})

test('outputContains: the shown lines in order, other lines between allowed, … within a line', () => {
  assert.ok(outputContains(['a', 'c …'], ['a', 'b', 'c and more']))
  assert.equal(outputContains(['c', 'a'], ['a', 'b', 'c']), false)
  assert.equal(outputContains(['exit 0'], ['exit 69']), false)
})
