import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// Root is this folder (`vite build web`); the console serves the output from SERVICE_WEB_DIR (default ./dist/web).
export default defineConfig({
  plugins: [react()],
  base: '/',
  build: {
    outDir: '../dist/web',
    emptyOutDir: true,
    // The console's CSP is default-src 'self': everything ships as files, nothing from a CDN.
    assetsInlineLimit: 0,
    sourcemap: false,
  },
});
