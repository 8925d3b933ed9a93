// Package filedb keeps file records (im_files) and their references from messages
// (im_group_files, with source_topic and source_seq) in the tenant's MySQL database. The file
// service writes the records right after each file event commits; the files-refs projection
// writes the references from the messages' head.files.
package filedb
