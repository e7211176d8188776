import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCodes, isToolReplayError } from './errors.ts'
import { diffJson, formatJsonPath, parseJsonPath, replaceAtJsonPath, selectJsonPath, setAtJsonPath } from './json-path.ts'

test('parses and formats the supported forms', () => {
  assert.deepEqual(parseJsonPath("$.a.b[0]['odd key'][*].c"), ['a', 'b', 0, 'odd key', '*', 'c'])
  assert.equal(formatJsonPath(['a', 0, 'odd key', '*']), "$.a[0]['odd key'][*]")
  for (const bad of ['a.b', '$.', '$[x]', '$..a', '$.a[']) {
    assert.throws(
      () => parseJsonPath(bad),
      (e: unknown) => isToolReplayError(e, ErrorCodes.INVALID_OPTION) && (e as Error).message.includes(`"${bad}"`),
    )
  }
})

test('selects through wildcards and removes or replaces every hit', () => {
  const v = {
    messages: [
      { id: 1, t: 'a' },
      { id: 2, t: 'b' },
    ],
  }
  assert.deepEqual(
    selectJsonPath(v, '$.messages[*].id').map((h) => h.value),
    [1, 2],
  )
  assert.deepEqual(replaceAtJsonPath(v, '$.messages[*].id'), { messages: [{ t: 'a' }, { t: 'b' }] })
  assert.deepEqual(replaceAtJsonPath(v, '$.messages[1].t', { value: 'X' }), {
    messages: [
      { id: 1, t: 'a' },
      { id: 2, t: 'X' },
    ],
  })
  assert.deepEqual(v.messages[0], { id: 1, t: 'a' }, 'input is not mutated')
})

test('setAtJsonPath sets one existing place and refuses wildcards or missing parents', () => {
  assert.deepEqual(setAtJsonPath({ active: true }, '$.active', false), { active: false })
  assert.throws(
    () => setAtJsonPath({}, '$.a[*]', 1),
    (e: unknown) => isToolReplayError(e, ErrorCodes.INVALID_PATCH),
  )
  assert.throws(
    () => setAtJsonPath({ a: 1 }, '$.b.c', 1),
    (e: unknown) => isToolReplayError(e, ErrorCodes.INVALID_PATCH),
  )
})

test('diffJson lists differences by path in document order', () => {
  assert.deepEqual(diffJson({ a: 1, b: [1, 2], c: 'x' }, { a: 2, b: [1], d: true, c: 'x' }), [
    { path: '$.a', kind: 'changed', before: 1, after: 2 },
    { path: '$.b[1]', kind: 'removed', before: 2 },
    { path: '$.d', kind: 'added', after: true },
  ])
  assert.deepEqual(diffJson({ a: 1 }, { a: '1' }), [{ path: '$.a', kind: 'type', before: 1, after: '1' }])
})
