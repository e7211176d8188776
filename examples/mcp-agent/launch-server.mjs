// Starts an MCP server from npm (its entry file is the first argument, the rest are its own arguments) after
// appending "<pid> <entry>" to $MCP_AGENT_SPAWN_LOG when it is set: the proof that strict replay starts none.
import { appendFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'

const [entry, ...rest] = process.argv.slice(2)
if (process.env.MCP_AGENT_SPAWN_LOG) appendFileSync(process.env.MCP_AGENT_SPAWN_LOG, `${process.pid} ${entry}\n`)
process.argv = [process.argv[0], entry, ...rest]
await import(pathToFileURL(entry).href)
