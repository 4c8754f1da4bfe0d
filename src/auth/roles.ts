/** A person's role in the console: viewer < operator < admin (routes require one at least). */
export type Role = 'viewer' | 'operator' | 'admin';
