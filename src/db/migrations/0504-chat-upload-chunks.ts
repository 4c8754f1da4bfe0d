import { sql, type Kysely } from 'kysely';

// An uploaded file's bytes move out of chat_attachments.content (one bytea per file, held whole
// in memory as it arrived and as it was served) into chunks of at most 1 MiB, written as the
// request body arrives and read one at a time as the file is served. A stored file is a row of
// chat_upload_files, made before its bytes arrive; its attachment row is made once they all
// have, and points at it. A file no attachment points at (an upload cut off, or whose
// attachment went with its owner) is deleted by the chat's housekeeping after a day. Existing
// uploads are moved here, cut in SQL. Frozen: never import application code here.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create table chat_upload_files (
    id serial primary key,
    realm_id integer not null references chat_realms(id) on delete cascade,
    created_at timestamptz not null default now()
  )`.execute(db);
  // Every chunk but a file's last holds exactly 1 MiB, so a byte range names its chunks.
  await sql`create table chat_upload_chunks (
    file_id integer not null references chat_upload_files(id) on delete cascade,
    seq integer not null,
    data bytea not null,
    primary key (file_id, seq)
  )`.execute(db);
  // Kept as sent, out of line: most uploads (images, archives) are compressed already.
  await sql`alter table chat_upload_chunks alter column data set storage external`.execute(db);

  await sql`alter table chat_attachments add column file_id integer unique references chat_upload_files(id) on delete cascade`.execute(db);
  // Each existing upload becomes the file of the same id, its bytes cut into 1 MiB chunks.
  await sql`insert into chat_upload_files (id, realm_id, created_at) select id, realm_id, create_time from chat_attachments`.execute(db);
  await sql`select setval(pg_get_serial_sequence('chat_upload_files', 'id'), coalesce((select max(id) from chat_upload_files), 0) + 1, false)`.execute(db);
  await sql`insert into chat_upload_chunks (file_id, seq, data)
    select a.id, s.seq, substring(a.content from s.seq * 1048576 + 1 for 1048576)
    from chat_attachments a cross join lateral generate_series(0, (octet_length(a.content) + 1048575) / 1048576 - 1) as s(seq)`.execute(db);
  await sql`update chat_attachments set file_id = id`.execute(db);
  await sql`alter table chat_attachments alter column file_id set not null`.execute(db);
  await sql`alter table chat_attachments drop column content`.execute(db);
  await sql`create index chat_upload_files_created on chat_upload_files (created_at)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table chat_attachments add column content bytea`.execute(db);
  await sql`update chat_attachments a set content = coalesce((select string_agg(c.data, ''::bytea order by c.seq) from chat_upload_chunks c where c.file_id = a.file_id), ''::bytea)`.execute(db);
  await sql`alter table chat_attachments alter column content set not null`.execute(db);
  await sql`alter table chat_attachments drop column file_id`.execute(db);
  await sql`drop table chat_upload_chunks`.execute(db);
  await sql`drop table chat_upload_files`.execute(db);
}
