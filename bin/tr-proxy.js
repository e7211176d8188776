#!/usr/bin/env node
// Entry point of the `tr-proxy` command. Published packages run the compiled dist/; a checkout
// without a build runs the TypeScript sources directly (Node >= 22.18 strips types).
import { existsSync } from 'node:fs'

const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(`tr-proxy needs Node >= 22.19 (this is ${process.version}).\n`)
  process.exit(2)
}
const compiled = new URL('../dist/cli/main.js', import.meta.url)
const { runCli } = await import(existsSync(compiled) ? compiled.href : new URL('../cli/main.ts', import.meta.url).href)
process.exitCode = await runCli(process.argv.slice(2))
