// Package filedb keeps the files-refs read model in the tenant's MySQL database: file records
// (im_files), folded from the file events, and their references from messages (im_group_files,
// with source_topic and source_seq), from the sent messages' head.files. The file service applies
// each file event right after appending it, so its next call reads its own change; the files-refs
// projection applies the same events, version-guarded, and the references. Both tables are rebuilt
// and verified from the log by `imledger replay --projection files-refs`.
package filedb
