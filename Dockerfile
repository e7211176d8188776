# tr-proxy: the Tool Replay proxy, run from the compiled package exactly as npm would install it.
# Stage "build" compiles the TypeScript (scripts/build.mjs: tsc's declarations, esbuild's bundle) and packs
# the package (`npm pack`: package.json, dist/, bin/; --ignore-scripts: "prepare" would build dist/ again);
# the final stage holds that package and its production dependencies, nothing else.
# e2e/docker-image.test.ts replays this file without Docker (COPY, WORKDIR, ENV, RUN), then runs
# `serve` and `replay` from the result (a source folder missing here fails its build step): keep every
# path in RUN lines relative to WORKDIR.
FROM node:22-bookworm-slim AS build
WORKDIR /build
COPY package.json package-lock.json tsconfig.json tsconfig.build.json index.ts README.md ./
COPY bin ./bin
COPY scripts/build.mjs ./scripts/build.mjs
COPY trace ./trace
COPY store ./store
COPY faults ./faults
COPY engine ./engine
COPY capture ./capture
COPY seal ./seal
COPY lab ./lab
COPY interceptor ./interceptor
COPY mcp ./mcp
COPY setup ./setup
COPY proxy ./proxy
COPY cases ./cases
COPY assets ./assets
COPY interop ./interop
COPY inspector ./inspector
COPY cli ./cli
RUN npm ci --no-audit --no-fund
RUN npm run build && npm pack --silent --ignore-scripts && tar -xzf tool-replay-*.tgz && rm tool-replay-*.tgz

FROM node:22-bookworm-slim
WORKDIR /opt/tool-replay
COPY --from=build /build/package ./
COPY package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
ENV TOOL_REPLAY_STORE=/data/store
VOLUME ["/data/store"]
EXPOSE 8080
ENTRYPOINT ["node", "bin/tr-proxy.js"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
