/// <reference types="vitest/config" />
import { defineConfig } from 'vite';

// No React plugin: Vite's built-in transform compiles TSX with the automatic JSX runtime.
export default defineConfig({
  base: '/',
  oxc: {
    jsx: { runtime: 'automatic', importSource: 'react' },
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    target: 'es2022',
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 400,
  },
  server: {
    // `npm run dev` against a local master: LC_API=http://127.0.0.1:8080 npm run dev
    proxy: {
      '/api': { target: process.env.LC_API ?? 'http://127.0.0.1:8080', changeOrigin: true },
    },
  },
  test: {
    environment: 'jsdom',
    setupFiles: ['./src/test/setup.ts'],
    include: ['src/**/*.test.{ts,tsx}'],
    restoreMocks: true,
  },
});
