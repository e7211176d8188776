#!/usr/bin/env node
/**
 * The layer check (`npm run lint` runs it): the package's folders sit on floors, and imports keep to them.
 *
 *   node scripts/check-layers.mjs [--root DIR]      exit 0: the layers hold; exit 1: each broken rule on stderr
 *
 * Rules, for every import (static, `export ... from`, `import type`, dynamic `import('...')`) of a file in a
 * folder on a floor:
 *   - down only: a folder imports folders on lower floors only (a type-only import counts: it is still an
 *     edge a reader has to follow, and it is how a cycle starts);
 *   - doors only: another folder is imported through its `index.ts`, the door for siblings, never an inner
 *     file and never its `public.ts` (the users' entry, a selection of the door);
 *   - a public entry (`<folder>/public.ts`) re-exports from its own door only, and the package's main entry
 *     (`index.ts` at the root) from public entries only; nothing in the package imports either;
 *   - no self-reference by package name (`tool-replay/...`): it would hide an edge from this check;
 *   - no cycles between files (type-only imports count here too): move the shared types down to a file both
 *     sides import;
 *   - every top-level folder with code is on a floor or listed as outside the package: a new folder is a
 *     decision about where it sits;
 *   - shipped code takes node:http with `process.getBuiltinModule('node:http')`, never a value import: an ESM
 *     import of node:http loads Node's bundled undici (~40 ms of every process start; see trace/patch.ts).
 * Test code (`*.test.*` beside the code, and what sits in a `fixtures/` folder) follows the same rules (a unit
 * test tests its floor and what is below it), except that it may also import fixtures: those of its own or a
 * lower floor's folder, and those of e2e/. Code that ships never imports test code: it leaves the tarball.
 *
 * To place a new folder, add it to FLOORS in scripts/folders.mjs (same floor = may not import each other). The floors follow the
 * folder roles in STYLE.md ("Layout shows the architecture") and README ("Layout").
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, posix, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { CHECKED_OUTSIDE, FLOORS, OUTSIDE, PACKAGE_FOLDERS } from './folders.mjs'

export { FLOORS, OUTSIDE }

const PACKAGE_NAME = 'tool-replay'
const DOOR = 'index.ts'
const PUBLIC_ENTRY = 'public.ts'
const CODE = /\.(ts|mts|cts|js|mjs|cjs)$/
const TEST_CODE = /(\.test\.[cm]?[jt]s$|(^|\/)fixtures\/)/
const FIXTURE = /(^|\/)fixtures\//

/**
 * Checks the tree at `root`; returns the broken rules, one line each (empty when the layers hold).
 * @example
 * const problems = checkLayers(process.cwd())
 */
export function checkLayers(root, floors = FLOORS, outside = OUTSIDE) {
  const floorOf = new Map(floors.flatMap((folders, floor) => folders.map((f) => [f, floor])))
  const problems = []
  const files = []
  for (const name of readdirSync(root).sort()) {
    if (name.startsWith('.')) continue
    const path = join(root, name)
    if (!statSync(path).isDirectory()) {
      if (name === DOOR) files.push(name)
      continue
    }
    if (floorOf.has(name)) files.push(...codeFiles(root, path))
    else if (!outside.includes(name) && codeFiles(root, path).length > 0) {
      problems.push(`${name}/: a folder of code on no floor. Place it in FLOORS (scripts/folders.mjs), or in OUTSIDE if it is not part of the package.`)
    }
  }
  const graph = new Map()
  for (const file of files) {
    const edges = []
    const text = readFileSync(join(root, file), 'utf8')
    for (const imp of importsOf(text)) {
      const problem = checkImport(root, file, imp, floorOf, floors)
      if (problem) problems.push(problem)
      const target = resolveRelative(root, file, imp.spec)
      if (target) edges.push(target)
    }
    graph.set(file, edges)
    problems.push(...nodeHttpValueImports(file, text))
  }
  for (const cycle of cyclesOf(graph)) {
    problems.push(`cycle: ${cycle.join(' → ')} (type-only imports count). Move what both sides share down to a file that imports neither.`)
  }
  return problems
}

function codeFiles(root, dir) {
  const out = []
  for (const name of readdirSync(dir).sort()) {
    if (name === 'node_modules' || name.startsWith('.')) continue
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...codeFiles(root, path))
    else if (CODE.test(name) && !name.endsWith('.d.ts')) out.push(relative(root, path).split(sep).join('/'))
  }
  return out
}

/** Every module specifier a file imports, with its line (comments and strings that are not imports are skipped). */
function importsOf(text) {
  const { importedFiles } = ts.preProcessFile(text, true, true)
  return importedFiles.map((f) => ({ spec: f.fileName, line: lineAt(text, f.pos) }))
}

/**
 * Declarations in a shipped file that import or re-export node:http as a value (not `import type` /
 * `export type`; an `import { type A }` still loads the module), read from the syntax tree, as rule messages.
 */
function nodeHttpValueImports(file, text) {
  if (TEST_CODE.test(file) || !text.includes('http')) return []
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false)
  const problems = []
  for (const node of source.statements) {
    const spec = node.moduleSpecifier
    if (!spec || !ts.isStringLiteral(spec) || (spec.text !== 'node:http' && spec.text !== 'http')) continue
    const typeOnly = ts.isImportDeclaration(node) ? node.importClause?.isTypeOnly === true : ts.isExportDeclaration(node) && node.isTypeOnly
    if (!typeOnly) {
      problems.push(
        `${file}:${lineAt(text, node.getStart(source))}: imports node:http as a module; take it with process.getBuiltinModule('node:http') (an ESM import of node:http loads Node's bundled undici, ~40 ms of every start: see trace/patch.ts). Type-only imports are fine.`,
      )
    }
  }
  return problems
}

function lineAt(text, pos) {
  let line = 1
  for (let i = 0; i < pos; i++) if (text.charCodeAt(i) === 10) line++
  return line
}

/** The file (relative to root, `/`-separated) a relative specifier names, or undefined for a package import. */
function resolveRelative(root, file, spec) {
  if (!spec.startsWith('./') && !spec.startsWith('../')) return undefined
  const target = posix.normalize(posix.join(posix.dirname(file), spec))
  if (!existsSync(join(root, target)) && target.endsWith('.js') && existsSync(join(root, `${target.slice(0, -3)}.ts`))) return `${target.slice(0, -3)}.ts`
  return target
}

function folderOf(file) {
  return file.includes('/') ? file.slice(0, file.indexOf('/')) : undefined
}

/** The rule one import breaks, as a message naming the edge and what to do, or undefined. */
function checkImport(root, file, imp, floorOf, floors) {
  const where = `${file}:${imp.line}`
  if (imp.spec === PACKAGE_NAME || imp.spec.startsWith(`${PACKAGE_NAME}/`)) {
    return `${where}: self-reference '${imp.spec}': inside the package import relatively, through the folder's door (index.ts), so this check sees the edge.`
  }
  const target = resolveRelative(root, file, imp.spec)
  if (!target) return undefined
  const from = folderOf(file)
  const to = folderOf(target)
  if (target.startsWith('../')) return `${where}: '${imp.spec}' leaves the package root.`
  if (from === undefined) {
    // The package's main entry: a selection of the folders' public entries.
    if (to !== undefined && target === `${to}/${PUBLIC_ENTRY}`) return undefined
    return `${where}: the main entry imports '${imp.spec}'; it re-exports from public entries (<folder>/${PUBLIC_ENTRY}) only.`
  }
  if (to === undefined) return `${where}: imports '${imp.spec}', the package's main entry; import the folder's door (<folder>/${DOOR}) instead.`
  if (file === `${from}/${PUBLIC_ENTRY}` && target !== `${from}/${DOOR}`) {
    return `${where}: the public entry of ${from}/ imports '${imp.spec}'; it re-exports from its own door (./${DOOR}) only, so what users get is a selection of it.`
  }
  if (target === `${to}/${PUBLIC_ENTRY}`) {
    return `${where}: imports '${imp.spec}', a public entry (for users); inside the package import '${posix.relative(posix.dirname(file), `${to}/${DOOR}`)}'.`
  }
  const testCode = TEST_CODE.test(file)
  if (!testCode && TEST_CODE.test(target)) {
    return `${where}: imports '${imp.spec}', test code (a test or a fixture), which is not published; move what it needs into the package.`
  }
  if (from === to) return undefined
  const fromFloor = floorOf.get(from)
  const toFloor = floorOf.get(to)
  const fixture = testCode && FIXTURE.test(target)
  if (toFloor === undefined) {
    if (fixture) return undefined
    return `${where}: imports '${imp.spec}' from ${to}/, which is not part of the package (on no floor).`
  }
  if (toFloor >= fromFloor) {
    const order = floors.map((f) => f.join('|')).join(' → ')
    const how = toFloor === fromFloor ? 'same floor' : 'back edge'
    return `${where}: ${how} ${from} → ${to}: ${from}/ (floor ${fromFloor}) imports '${imp.spec}' (floor ${toFloor}). Imports go down only (${order}, each floor importing those before it); move what ${from}/ needs down.`
  }
  if (target !== `${to}/${DOOR}` && !fixture) {
    return `${where}: imports '${imp.spec}', an inner file of ${to}/; import '${posix.relative(posix.dirname(file), `${to}/${DOOR}`)}' (export the name there if it is missing).`
  }
  return undefined
}

/** The cycles of the import graph, one per strongly connected component, each as a path that returns to its start. */
function cyclesOf(graph) {
  const index = new Map()
  const low = new Map()
  const stack = []
  const onStack = new Set()
  const components = []
  let next = 0
  const visit = (v) => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v), low.get(w)))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)))
    }
    if (low.get(v) !== index.get(v)) return
    const component = []
    let w
    do {
      w = stack.pop()
      onStack.delete(w)
      component.push(w)
    } while (w !== v)
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) components.push(component)
  }
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v)
  return components.map((c) => cyclePath(graph, new Set(c)))
}

/** One concrete cycle through a component: from its first file (sorted) back to it, by breadth-first search. */
function cyclePath(graph, members) {
  const start = [...members].sort()[0]
  const previous = new Map([[start, undefined]])
  const queue = [start]
  while (queue.length > 0) {
    const v = queue.shift()
    for (const w of graph.get(v) ?? []) {
      if (!members.has(w)) continue
      if (w === start) {
        const path = [start]
        for (let u = v; u !== start; u = previous.get(u)) path.splice(1, 0, u)
        return [...path, start]
      }
      if (!previous.has(w)) {
        previous.set(w, v)
        queue.push(w)
      }
    }
  }
  return [start, start]
}

/**
 * The folder lists that cannot import scripts/folders.mjs (tsconfig.json and tsconfig.build.json, JSON) checked
 * against it, and the Dockerfile's copies: a folder missing there is code nobody type-checks or builds. Skipped where a file is absent.
 */
export function checkFolderLists(root) {
  const want = {
    'tsconfig.json': ['index.ts', ...PACKAGE_FOLDERS, ...CHECKED_OUTSIDE],
    'tsconfig.build.json': ['index.ts', ...PACKAGE_FOLDERS],
  }
  const problems = []
  for (const [file, expected] of Object.entries(want)) {
    const path = join(root, file)
    if (!existsSync(path)) continue
    const include = JSON.parse(readFileSync(path, 'utf8')).include ?? []
    const missing = expected.filter((f) => !include.includes(f))
    const extra = include.filter((f) => !expected.includes(f))
    if (missing.length > 0 || extra.length > 0)
      problems.push(
        `${file}: "include" must list the folders of scripts/folders.mjs (missing: ${missing.join(', ') || 'none'}; not there: ${extra.join(', ') || 'none'}).`,
      )
  }
  return problems.concat(checkDockerfile(root))
}

/** The Dockerfile's build stage copies each package folder (`COPY trace ./trace`): one left out breaks the image's build. */
function checkDockerfile(root) {
  const path = join(root, 'Dockerfile')
  if (!existsSync(path)) return []
  const copied = new Set([...readFileSync(path, 'utf8').matchAll(/^COPY\s+(\w[\w-]*)\s+\.\/\1\s*$/gm)].map((m) => m[1]))
  const missing = PACKAGE_FOLDERS.filter((f) => !copied.has(f))
  return missing.length === 0
    ? []
    : [`Dockerfile: the build stage must copy every folder of scripts/folders.mjs (missing: ${missing.join(', ')}); add \`COPY <folder> ./<folder>\`.`]
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--root')
  const root = at >= 0 ? resolve(process.argv[at + 1] ?? '.') : dirname(dirname(fileURLToPath(import.meta.url)))
  const problems = [...checkLayers(root), ...checkFolderLists(root)]
  if (problems.length > 0) {
    process.stderr.write(`Layer check failed (${problems.length}):\n${problems.map((p) => `  ${p}`).join('\n')}\n`)
    process.exitCode = 1
  } else {
    process.stdout.write(`Layer check: ${FLOORS.map((f) => f.join('|')).join(' → ')} hold (doors only, down only, no cycles).\n`)
  }
}
