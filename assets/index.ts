/** Shared recordings in a git assets repository: the pointer file, the local cache, restore, push and status. */

/** The cache folder: TOOL_REPLAY_ASSETS_CACHE, else the XDG cache. */
export { defaultAssetsCacheDir } from './asset-cache.ts'
export type { AssetsPointer } from './pointer.ts'
/** The pointer file (`tool-replay.assets.json`): parse, format, read, write. */
export { DEFAULT_ASSETS_DIR, DEFAULT_TAG_PREFIX, formatPointer, POINTER_FILE, POINTER_FORMAT, parsePointer, readPointer, writePointer } from './pointer.ts'
export type { PushFinding, PushOptions, PushResult } from './push.ts'
/** Exports, scans and pushes traces under a new tag, then updates the pointer. */
export { pushAssets } from './push.ts'
export type { RestoreOptions, RestoreResult } from './restore.ts'
/** Fetches the pinned traces (shallow, sparse) into the cache and imports them into the store. */
export { restoreAssets } from './restore.ts'
export type { AssetsStatus, StatusOptions, TraceAssetState } from './status.ts'
/** What differs between the pointer, the store and the cache. */
export { assetsStatus } from './status.ts'
