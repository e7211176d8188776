import assert from 'node:assert/strict'
import { test } from 'node:test'
import { isToolReplayError } from './errors.ts'
import {
  type OptionDeclaration,
  type OptionInputs,
  type OptionValues,
  optionHelp,
  optionsFromCode,
  optionsFromFlags,
  parseOption,
} from './option-declaration.ts'

const TABLE = {
  name: { flag: 'name', type: 'string', help: 'A name' },
  sizeBytes: { flag: 'size-bytes', type: 'number', unit: 'bytes', default: 64, help: 'Largest size' },
  tags: { flag: 'tag', type: 'strings', help: 'A tag' },
  tail: { flag: 'tail', type: 'string', choices: ['strict', 'live'], default: 'strict', help: 'Tail' },
  even: {
    flag: 'even',
    type: 'number',
    help: 'An even number',
    parse: (v: unknown, name: string) => {
      if (typeof v === 'number' && v % 2 === 0) return v / 2
      throw new Error(`${name} is odd`)
    },
  },
  /** Given as a word or a number, held as a number: its parse's parameter says what code may give. */
  level: {
    flag: 'level',
    type: 'string',
    help: 'A level',
    parse: (v: 'low' | 'high' | number, name: string): number => {
      if (v === 'low' || v === 'high') return v === 'low' ? 1 : 9
      if (typeof v === 'number' && v >= 1 && v <= 9) return v
      throw new Error(`${name} is no level`)
    },
  },
} as const satisfies Record<string, OptionDeclaration>

const invalid = (flag: string) => (e: unknown) => isToolReplayError(e) && e.code === 'TR_INVALID_OPTION' && e.message.startsWith(`Invalid ${flag} `)

test('options from flags: given flags by their name in code, checked; flags not given left out', () => {
  const given: OptionValues<typeof TABLE> = optionsFromFlags(TABLE, { name: 'a', tag: ['x', 2], 'size-bytes': undefined, other: 1 })
  assert.deepEqual(given, { name: 'a', tags: ['x', '2'] })
  assert.deepEqual(optionsFromFlags(TABLE, { tail: 'live', even: 8 }), { tail: 'live', even: 4 })
})

test('a value of the wrong type or outside the choices is TR_INVALID_OPTION naming the flag as typed', () => {
  assert.throws(() => optionsFromFlags(TABLE, { 'size-bytes': Number.NaN }), invalid('--size-bytes'))
  assert.throws(
    () => optionsFromFlags(TABLE, { tail: 'sometimes' }),
    (e: unknown) => invalid('--tail')(e) && /"strict", "live"/.test((e as Error).message),
  )
  assert.throws(() => optionsFromFlags(TABLE, { tag: 'x' }), invalid('--tag'))
  assert.throws(() => parseOption(TABLE.name, 3, 'name'), invalid('name'))
  // A declaration's own check gets the name too.
  assert.throws(() => optionsFromFlags(TABLE, { even: 3 }), /--even is odd/)
})

test('help: a number with a unit states its default (the library applies it); others keep their help', () => {
  assert.equal(optionHelp(TABLE.sizeBytes), 'Largest size (bytes; default 64)')
  assert.equal(optionHelp(TABLE.tail), 'Tail')
})

test('options from code: checked by the same declarations, named as code spells them (with a prefix for a nested object)', () => {
  // Types: what code gives (`level`: a word or a number) and what it holds (a number), both from the declaration.
  const given: OptionInputs<typeof TABLE> = { level: 'high', tags: ['a'], sizeBytes: 8 }
  const held: OptionValues<typeof TABLE> = optionsFromCode(TABLE, { ...given, other: 'left to its own table', name: undefined })
  assert.deepEqual(held, { sizeBytes: 8, tags: ['a'], level: 9 })
  assert.deepEqual(optionsFromCode(TABLE, undefined), {})
  assert.throws(() => optionsFromCode(TABLE, { sizeBytes: '8' }), invalid('sizeBytes'))
  assert.throws(() => optionsFromCode(TABLE, { tags: 'a' }, 'labels.'), invalid('labels.tags'))
  // A declaration's own check is called with whatever was given, whatever its parameter's type says.
  assert.throws(() => optionsFromCode(TABLE, { level: 'medium' }), /level is no level/)
})
