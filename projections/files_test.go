package projections_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/filedb"
	"github.com/imledger/imledger/replay"
)

// TestFileRefsProjectAndRebuild: the files-refs projection builds the file records from the file
// events of im.audit.event and the references from the sent messages of both message topics, in
// whatever order they arrive; verify matches, names im_group_files after a reference is deleted by
// hand, and a rebuild restores it with the file's reference count.
func TestFileRefsProjectAndRebuild(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("filerefs")
	store := projtest.NewEventStore(t, h.Pool)
	files := filedb.New(m.Router)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	a, b := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	fe := func(id uuid.UUID, v int64, typ domain.EventType, p any) domain.Envelope {
		return projtest.MustEnvelope(tn, domain.FileStreamID(id), v, typ, p)
	}
	created := func(id uuid.UUID) domain.FileCreated {
		return domain.FileCreated{FileID: id.String(), Uploader: 2, Name: "f.txt", ContentType: "text/plain", Size: 5,
			ObjectKey: tn.String() + "/" + id.String(), CreatedAt: t0}
	}
	sent := func(topic domain.Topic, seq int64, ids ...uuid.UUID) domain.Envelope {
		e := projtest.SentEvent(tn, topic, seq, 2, "see attached")
		var p domain.MessageSent
		if err := e.Decode(&p); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			p.Head.Files = append(p.Head.Files, id.String())
		}
		e.Payload = projtest.MustJSON(p)
		return e
	}
	direct, err := domain.ParseTopic("p2p2_3")
	if err != nil {
		t.Fatal(err)
	}
	dm := sent(direct, 1, a, b)
	dm.EventType = domain.EventDirectMessageSent
	history := projtest.AppendAll(t, store, []domain.Envelope{
		sent(projtest.GroupTopic(4), 1, a), // projected before its file's record may be
		fe(a, 1, domain.EventFileCreated, created(a)),
		fe(a, 2, domain.EventFileUploaded, domain.FileUploaded{FileID: a.String(), Size: 5, SHA256: fmt.Sprintf("%064x", 1),
			ObjectKey: tn.String() + "/" + a.String() + ".x", UploadedAt: t0.Add(time.Minute)}),
		fe(a, 3, domain.EventFileAudited, domain.FileAudited{FileID: a.String(), Status: domain.FileAuditApproved, AuditedAt: t0.Add(2 * time.Minute)}),
		fe(b, 1, domain.EventFileCreated, created(b)),
		fe(b, 2, domain.EventFileDeleted, domain.FileDeleted{FileID: b.String(), Reason: "unreferenced", DeletedAt: t0.Add(time.Hour)}),
		fe(b, 3, domain.EventFileRestored, domain.FileRestored{FileID: b.String(), Reason: "referenced", RestoredAt: t0.Add(time.Hour)}),
		dm,
	})
	p := projections.FileRefsMySQL(files, "")
	if p.ConsumerGroup != projections.GroupFileRefsMySQL || len(p.Topics) != 3 || !p.Accept(domain.EventFileRestored) || p.Accept(domain.EventGroupMessageRecalled) {
		t.Fatalf("projection %+v", p)
	}
	h.Run(h.Config(), p)
	h.Publish(history...)
	projtest.Eventually(t, 30*time.Second, func() error {
		fa, err := files.Get(projtest.Ctx(t), tn, a.String())
		if err != nil || fa.RefCount != 2 || fa.Audit != domain.FileAuditApproved || fa.Version != 3 {
			return fmt.Errorf("file a: %+v %v", fa, err)
		}
		fb, err := files.Get(projtest.Ctx(t), tn, b.String())
		if err != nil || fb.Status != domain.FileStatusPending || fb.RefCount != 1 || fb.Version != 3 {
			return fmt.Errorf("file b: %+v %v", fb, err)
		}
		return nil
	})
	rb, err := replay.NewFileRebuilder(files, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || !res.OK() || res.Live["im_group_files"].Rows != 3 {
		t.Fatalf("verify of the projected files: %+v %v", res, err)
	}
	db, err := m.Router.DB(projtest.Ctx(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(projtest.Ctx(t), "DELETE FROM im_group_files WHERE source_topic = 'grp4'"); err != nil {
		t.Fatal(err)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || len(res.Diffs) != 1 || res.Diffs[0].Part != "im_group_files" {
		t.Fatalf("verify after a reference was deleted by hand: %+v %v", res, err)
	}
	if _, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || !res.OK() {
		t.Fatalf("verify after the rebuild: %+v %v", res, err)
	}
	if fa, err := files.Get(projtest.Ctx(t), tn, a.String()); err != nil || fa.RefCount != 2 {
		t.Fatalf("file a after the rebuild: %+v %v", fa, err)
	}
}
