/**
 * The page's static files: built from inspector/ui/ by scripts/build-inspector-ui.mjs into inspector/assets/
 * (committed, and shipped in the npm package), found from this file in a checkout (inspector/) and in the
 * compiled package (dist/inspector/).
 */
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** The files the page is made of, with their content types. */
export const ASSET_TYPES: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
}

/** The directory holding the built page. */
export function assetsDir(): URL {
  for (const rel of ['./assets/', '../../inspector/assets/']) {
    const url = new URL(rel, import.meta.url)
    if (existsSync(new URL('index.html', url))) return url
  }
  throw new ToolReplayError(
    ErrorCodes.INSPECT_START_FAILED,
    "The inspector's page is missing (inspector/assets/index.html). Rebuild it with `node scripts/build-inspector-ui.mjs`, or reinstall tool-replay.",
  )
}

/** Loads every asset once, at start: the page is small and must not change under a running server. */
export async function loadAssets(): Promise<Map<string, { type: string; bytes: Buffer }>> {
  const dir = assetsDir()
  const out = new Map<string, { type: string; bytes: Buffer }>()
  for (const [name, type] of Object.entries(ASSET_TYPES)) out.set(name, { type, bytes: await readFile(new URL(name, dir)) })
  return out
}
