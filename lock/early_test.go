package lock

import (
	"context"
	"testing"
	"time"
)

// TestAnswerAheadOfItsReplyIsKept: a request is registered for its Answer
// only once the Acquire reply says it waits, so an Answer that overtakes
// that reply is kept for it, and one that nobody asks for is forgotten
// after NodeTimeout.
func TestAnswerAheadOfItsReplyIsKept(t *testing.T) {
	n := serveNode(t)
	s := &Service{n: n}
	id := OwnerID{Node: n.inc, Seq: 7}
	if err := s.Answer(context.Background(), &AnswerArgs{Owner: id, Seq: 3, Node: "other:1", Code: codeDeadlock}, &Ack{}); err != nil {
		t.Fatal(err)
	}
	_, v, ok := n.expectAnswer(answerKey{id, 3, "other:1"}, nil)
	if !ok || v.code != codeDeadlock {
		t.Fatalf("expectAnswer after an early Answer: code %d ok %v, want %d true", v.code, ok, codeDeadlock)
	}
	if _, _, ok := n.expectAnswer(answerKey{id, 3, "other:1"}, nil); ok {
		t.Fatal("an early Answer was taken twice")
	}
	n.forgetAnswer(answerKey{id, 3, "other:1"})

	// One nobody asks for is swept once NodeTimeout passed.
	if err := s.Answer(context.Background(), &AnswerArgs{Owner: id, Seq: 4, Node: "other:1", Code: codeOK}, &Ack{}); err != nil {
		t.Fatal(err)
	}
	n.sweepEarlyAnswers(time.Now())
	if left := earlyCount(n); left != 1 {
		t.Fatalf("%d early Answers kept before NodeTimeout, want 1", left)
	}
	n.sweepEarlyAnswers(time.Now().Add(n.cfg.NodeTimeout + time.Second))
	if left := earlyCount(n); left != 0 {
		t.Fatalf("%d early Answers kept after NodeTimeout, want 0", left)
	}
}

func earlyCount(n *Node) int {
	c := 0
	for i := range n.answers {
		sh := &n.answers[i]
		sh.mu.Lock()
		c += len(sh.early)
		sh.mu.Unlock()
	}
	return c
}
