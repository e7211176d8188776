/**
 * The committed page is what the build script makes from inspector/ui/: a change to the sources that was not
 * rebuilt (`node scripts/build-inspector-ui.mjs`) fails here, and so does a hand-edited bundle.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { ASSET_TYPES, assetsDir } from './assets.ts'

test('inspector/assets/ is fresh: the build script makes exactly the committed files', async () => {
  const { buildInspectorUi } = (await import(new URL('../scripts/build-inspector-ui.mjs', import.meta.url).href)) as {
    buildInspectorUi: () => Promise<Map<string, Buffer>>
  }
  const built = await buildInspectorUi()
  assert.deepEqual([...built.keys()].sort(), Object.keys(ASSET_TYPES).sort())
  for (const [name, bytes] of built) {
    const committed = readFileSync(new URL(name, assetsDir()))
    assert.ok(committed.equals(bytes), `inspector/assets/${name} is stale: run node scripts/build-inspector-ui.mjs and commit the result`)
  }
})

test('the page loads nothing from outside: no http(s) URL in the HTML or CSS, the script only from its own origin', () => {
  const html = readFileSync(new URL('index.html', assetsDir()), 'utf8')
  const css = readFileSync(new URL('app.css', assetsDir()), 'utf8')
  assert.doesNotMatch(html + css, /https?:\/\//)
  assert.match(html, /<script type="module" src="\/app\.js">/)
})
