import { assetsCommand } from './assets.ts'
import { caCommand } from './ca.ts'
import { checkCommand } from './check.ts'
import type { CommandModule } from './command.ts'
import { demoCommand } from './demo.ts'
import { diffCommand } from './diff.ts'
import { driftCommand } from './drift.ts'
import { duCommand } from './du.ts'
import { emitTestCommand } from './emit-test.ts'
import { envCommand } from './env.ts'
import { exportCommand } from './export.ts'
import { exportHarCommand } from './export-har.ts'
import { exportMswCommand } from './export-msw.ts'
import { forkCommand } from './fork.ts'
import { fsckCommand } from './fsck.ts'
import { gcCommand } from './gc.ts'
import { importCommand } from './import.ts'
import { importHarCommand } from './import-har.ts'
import { inspectCommand } from './inspect.ts'
import { lsCommand } from './ls.ts'
import { mcpCommand } from './mcp.ts'
import { recordCommand } from './record.ts'
import { replayCommand } from './replay.ts'
import { rmCommand } from './rm.ts'
import { scanCommand } from './scan.ts'
import { serveCommand } from './serve.ts'
import { sessionCommand } from './session.ts'
import { showCommand } from './show.ts'
import { verifyCommand } from './verify.ts'

/** Every CLI command, in --help order. Each lives in its own file. */
export const COMMANDS: CommandModule[] = [
  lsCommand,
  showCommand,
  exportCommand,
  importCommand,
  importHarCommand,
  exportHarCommand,
  exportMswCommand,
  rmCommand,
  fsckCommand,
  gcCommand,
  duCommand,
  forkCommand,
  diffCommand,
  driftCommand,
  checkCommand,
  emitTestCommand,
  verifyCommand,
  scanCommand,
  assetsCommand,
  recordCommand,
  replayCommand,
  serveCommand,
  mcpCommand,
  sessionCommand,
  envCommand,
  caCommand,
  demoCommand,
  inspectCommand,
]
