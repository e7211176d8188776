import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCodes, isToolReplayError, ToolReplayError } from './errors.ts'

test('errors of another copy of the package are recognised, by instanceof and by isToolReplayError', async () => {
  // A second instance of the same module: what an app gets when it and a dependency each install the package.
  const copy = (await import(`./errors.ts?copy=${Date.now()}`)) as typeof import('./errors.ts')
  assert.notEqual(copy.ToolReplayError, ToolReplayError, 'the test needs two distinct classes')
  const theirs = new copy.ToolReplayError(copy.ErrorCodes.REPLAY_MISS, 'from the other copy')
  const ours = new ToolReplayError(ErrorCodes.STORE_LOCKED, 'from this copy')
  assert.ok(theirs instanceof ToolReplayError)
  assert.ok(ours instanceof copy.ToolReplayError)
  assert.ok(isToolReplayError(theirs, ErrorCodes.REPLAY_MISS))
  assert.ok(copy.isToolReplayError(ours, 'TR_STORE_LOCKED'))
  assert.equal(isToolReplayError(theirs, ErrorCodes.STORE_LOCKED), false)
})

test('only branded errors pass: a plain Error or a look-alike with a code does not', () => {
  assert.equal(new Error('x') instanceof ToolReplayError, false)
  assert.equal({ code: 'TR_REPLAY_MISS', message: 'x' } instanceof ToolReplayError, false)
  assert.equal(isToolReplayError(null), false)
  assert.equal(isToolReplayError('TR_REPLAY_MISS'), false)
  const err = new ToolReplayError(ErrorCodes.USAGE, 'bad')
  assert.ok(err instanceof Error)
  assert.equal(err.name, 'ToolReplayError')
  // The brand is not enumerable: JSON and structured output stay as they were.
  assert.deepEqual(Object.keys(err).sort(), ['code', 'details', 'name'])
})
