/**
 * The public surface, pinned: the sorted names every subpath of the package exports (types as `type Name`),
 * against the committed e2e/public-surface.json. A new or removed export is a decision; when you mean it,
 * regenerate the snapshot and commit it with the change:
 *
 *   UPDATE_SNAPSHOT=1 node --conditions=tool-replay-source --test e2e/public-surface.test.ts
 *
 * Names are read from each subpath's entry (the file its `tool-replay-source` condition names) by parsing
 * it: `export { ... } from`, `export type { ... }` and exported declarations; `export *` is refused, since it
 * would make every name of a file API. The value names are checked against what importing the subpath by the
 * package's own name yields, so the parse cannot drift from what users get.
 */
import assert from 'node:assert/strict'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import ts from 'typescript'

const ROOT = new URL('../', import.meta.url).pathname
const SNAPSHOT = join(ROOT, 'e2e/public-surface.json')
const UPDATE = 'UPDATE_SNAPSHOT=1 node --conditions=tool-replay-source --test e2e/public-surface.test.ts'
/** Entries that run on import (they register test hooks): their names are read, not imported. */
const SIDE_EFFECT_ENTRIES = new Set(['./node-test', './vitest', './proxy-node-test', './proxy-vitest'])

interface Conditions {
  types: string
  'tool-replay-source': string
  default: string
}

interface ExportedName {
  name: string
  type: boolean
}

function exportsMap(): Record<string, Conditions> {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, Conditions | string> }
  const out: Record<string, Conditions> = {}
  for (const [subpath, target] of Object.entries(pkg.exports)) if (typeof target !== 'string') out[subpath] = target
  return out
}

/** The names a module file exports, read from its syntax. */
function exportedNames(file: string): ExportedName[] {
  const source = ts.createSourceFile(file, readFileSync(join(ROOT, file), 'utf8'), ts.ScriptTarget.Latest, true)
  const out: ExportedName[] = []
  for (const st of source.statements) {
    if (ts.isExportDeclaration(st)) {
      assert.ok(st.exportClause && ts.isNamedExports(st.exportClause), `${file}: \`export *\` makes every name of a file API; re-export by name.`)
      for (const el of st.exportClause.elements) out.push({ name: el.name.text, type: st.isTypeOnly || el.isTypeOnly })
      continue
    }
    if (ts.isExportAssignment(st)) {
      out.push({ name: 'default', type: false })
      continue
    }
    const exported = ts.canHaveModifiers(st) && (ts.getModifiers(st) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword)
    if (!exported) continue
    if (ts.isVariableStatement(st)) {
      for (const d of st.declarationList.declarations) out.push({ name: d.name.getText(source), type: false })
    } else if (ts.isInterfaceDeclaration(st) || ts.isTypeAliasDeclaration(st)) {
      out.push({ name: st.name.text, type: true })
    } else if ((ts.isFunctionDeclaration(st) || ts.isClassDeclaration(st)) && st.name) {
      out.push({ name: st.name.text, type: false })
    }
  }
  return out
}

const byName = (a: string, b: string) => {
  const [x, y] = [a.replace(/^type /, ''), b.replace(/^type /, '')]
  return x.toLowerCase() < y.toLowerCase() ? -1 : x.toLowerCase() > y.toLowerCase() ? 1 : x < y ? -1 : x > y ? 1 : 0
}

function surface(): Record<string, string[]> {
  const out: Record<string, string[]> = {}
  for (const [subpath, conditions] of Object.entries(exportsMap()).sort(([a], [b]) => (a < b ? -1 : 1))) {
    out[subpath] = exportedNames(conditions['tool-replay-source'].replace(/^\.\//, ''))
      .map((n) => (n.type ? `type ${n.name}` : n.name))
      .sort(byName)
  }
  return out
}

/** What changed between the snapshot and now, one line per subpath, or '' when nothing did. */
function changes(before: Record<string, string[]>, now: Record<string, string[]>): string {
  const lines: string[] = []
  for (const subpath of [...new Set([...Object.keys(before), ...Object.keys(now)])].sort()) {
    if (!(subpath in now)) lines.push(`  ${subpath}: subpath removed`)
    else if (!(subpath in before)) lines.push(`  ${subpath}: subpath added (${now[subpath]?.length} names)`)
    else {
      const [was, is] = [new Set(before[subpath]), new Set(now[subpath])]
      const added = [...is].filter((n) => !was.has(n))
      const removed = [...was].filter((n) => !is.has(n))
      if (added.length > 0 || removed.length > 0) {
        lines.push(`  ${subpath}:${added.length > 0 ? ` added ${added.join(', ')}` : ''}${removed.length > 0 ? ` removed ${removed.join(', ')}` : ''}`)
      }
    }
  }
  return lines.join('\n')
}

test('every public subpath exports exactly the names in e2e/public-surface.json', () => {
  const now = surface()
  if (process.env.UPDATE_SNAPSHOT) {
    writeFileSync(SNAPSHOT, `${JSON.stringify({ '//': `The package's public names per subpath. Regenerate deliberately: ${UPDATE}`, ...now }, null, 2)}\n`)
  }
  const { '//': _note, ...before } = JSON.parse(readFileSync(SNAPSHOT, 'utf8')) as Record<string, string[]>
  const diff = changes(before, now)
  assert.equal(
    diff,
    '',
    `The public surface changed:\n${diff}\nEvery export is a decision: if this is deliberate, update the snapshot with \`${UPDATE}\` and commit it; if not, take the name out of the subpath's public entry (keep it in the folder's index.ts for sibling folders).`,
  )
})

test('each subpath points its three conditions at one entry: the TypeScript source, its .d.ts and its .js in dist/', () => {
  for (const [subpath, c] of Object.entries(exportsMap())) {
    const entry = c['tool-replay-source']
    assert.match(entry, /^\.\/[a-z0-9/-]+\.ts$/, subpath)
    assert.equal(c.types, entry.replace(/^\.\//, './dist/').replace(/\.ts$/, '.d.ts'), `${subpath} types`)
    assert.equal(c.default, entry.replace(/^\.\//, './dist/').replace(/\.ts$/, '.js'), `${subpath} default`)
    assert.ok(
      entry === './index.ts' || entry.endsWith('/public.ts') || SIDE_EFFECT_ENTRIES.has(subpath),
      `${subpath}: ${entry} is neither a public entry nor a setup entry`,
    )
  }
})

test('importing each subpath by the package name yields the value names the snapshot lists', async () => {
  for (const [subpath, names] of Object.entries(surface())) {
    if (SIDE_EFFECT_ENTRIES.has(subpath)) continue
    const specifier = subpath === '.' ? 'tool-replay' : `tool-replay/${subpath.slice(2)}`
    const module = (await import(specifier)) as Record<string, unknown>
    const values = names.filter((n) => !n.startsWith('type '))
    assert.deepEqual(Object.keys(module).sort(byName), values, `${specifier}: runtime exports differ from the parsed entry`)
  }
})

test('internals stay behind the doors: no ./lab or ./capture subpath, and the engine drops what its door calls internal', () => {
  const now = surface()
  assert.ok(!('./lab' in now), 'the lab is private to the CLI')
  assert.ok(!('./capture' in now), 'the capture lifecycle is internal')
  for (const internal of ['judgeTestReplay', 'registerVitestFileHooks', 'loadedAsTestPreload', 'resolveTestTrace', 'ArrivalOrder', 'clientAbortError']) {
    assert.ok(!now['./engine']?.includes(internal), `tool-replay/engine exports ${internal}`)
  }
})
