package openai_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/google/uuid"
	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// pngOf is a PNG of w×h pixels.
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// userInput is input of one user message with parts.
func userInput(parts ...responses.ResponseInputContentUnionParam) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam(parts), responses.EasyInputMessageRoleUser),
	}}
}

func textPart(s string) responses.ResponseInputContentUnionParam {
	return responses.ResponseInputContentUnionParam{OfInputText: &responses.ResponseInputTextParam{Text: s}}
}

func imagePart(url, fileID string) responses.ResponseInputContentUnionParam {
	p := &responses.ResponseInputImageParam{Detail: responses.ResponseInputImageDetailAuto}
	if url != "" {
		p.ImageURL = openaisdk.String(url)
	}
	if fileID != "" {
		p.FileID = openaisdk.String(fileID)
	}
	return responses.ResponseInputContentUnionParam{OfInputImage: p}
}

func filePart(p responses.ResponseInputFileParam) responses.ResponseInputContentUnionParam {
	return responses.ResponseInputContentUnionParam{OfInputFile: &p}
}

// counts are the rows a send writes: files, files held, messages,
// conversations.
func counts(t *testing.T, tb *apitest.Bundle) string {
	t.Helper()
	var s string
	if err := tb.Pool.QueryRow(context.Background(), `SELECT concat_ws(',', (SELECT count(*) FROM convo.files),
		(SELECT count(*) FROM convo.message_files), (SELECT count(*) FROM convo.messages),
		(SELECT count(*) FROM convo.conversations))`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// An image sent as a data URL and a text file named by its convo file id
// reach the demo worker, whose reply acknowledges both (the image's size
// in pixels, the text's first line); input_items and the conversation's
// items show them back as input_image and input_file parts with their
// file ids. A later turn (previous_response_id) sends a file by
// file_data.
func TestInputFilesRoundTrip(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Files: true, Workers: true})
	c := client(t, tb, "alice")
	ctx := context.Background()
	notes, err := tb.Files.Upload(ctx, "alice", "notes.txt", "text/plain", strings.NewReader("shopping list\neggs\n"))
	if err != nil {
		t.Fatal(err)
	}
	img := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngOf(t, 3, 2))
	resp, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
		Input: userInput(textPart("what are these?"), imagePart(img, ""),
			filePart(responses.ResponseInputFileParam{FileID: openaisdk.String(notes.ID.String())}))})
	if err != nil {
		t.Fatal(err)
	}
	out := resp.OutputText()
	if resp.Status != "completed" || !strings.Contains(out, "3×2 pixels") || !strings.Contains(out, "shopping list") {
		t.Fatalf("reply %q (%s); want it to acknowledge the 3×2 image and notes.txt", out, resp.Status)
	}

	page, err := c.Responses.InputItems.List(ctx, resp.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 {
		t.Fatalf("input items %s; want one", page.RawJSON())
	}
	parts := page.Data[0].Content.OfInputItemContentList
	if len(parts) != 3 || parts[0].Type != "input_text" || parts[0].Text != "what are these?" ||
		parts[1].Type != "input_image" || parts[1].FileID == "" || parts[1].Detail != "auto" ||
		parts[2].Type != "input_file" || parts[2].FileID != notes.ID.String() || parts[2].Filename != "notes.txt" {
		t.Fatalf("input item %s; want the text, the image, notes.txt", page.Data[0].RawJSON())
	}
	// The image is a file of alice's, its bytes the ones sent.
	f, err := tb.Files.Get(ctx, "alice", uuid.MustParse(parts[1].FileID))
	if err != nil || f.MediaType != "image/png" {
		t.Fatalf("the image's file %+v %v; want alice's PNG", f, err)
	}

	items, err := c.Conversations.Items.List(ctx, resp.Conversation.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil {
		t.Fatal(err)
	}
	user := items.Data[0].Content.OfMessageContentArray
	if items.Data[0].Role != "user" || len(user) != 3 || user[1].Type != "input_image" || user[1].FileID != parts[1].FileID ||
		user[2].Type != "input_file" || user[2].FileID != notes.ID.String() || user[2].Filename != "notes.txt" {
		t.Fatalf("conversation items %s; want the user message with its two files", items.RawJSON())
	}

	// A file only, by file_data, after the first response.
	next, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", PreviousResponseID: openaisdk.String(resp.ID),
		Input: userInput(filePart(responses.ResponseInputFileParam{Filename: openaisdk.String("todo.md"),
			FileData: openaisdk.String("data:text/markdown;base64," + base64.StdEncoding.EncodeToString([]byte("# todo\n- call\n")))}))})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(next.OutputText(), "# todo") && !strings.Contains(next.OutputText(), "todo.md") {
		t.Fatalf("reply %q; want it to acknowledge todo.md", next.OutputText())
	}
	page, err = c.Responses.InputItems.List(ctx, next.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if parts := page.Data[0].Content.OfInputItemContentList; len(parts) != 1 || parts[0].Type != "input_file" || parts[0].Filename != "todo.md" {
		t.Fatalf("input item %s; want todo.md alone", page.Data[0].RawJSON())
	}
}

// Every refused file refuses the request naming its part, and writes no
// file, message or conversation.
func TestInputFileRefusals(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Files: true})
	c := client(t, tb, "alice")
	ctx := context.Background()
	bobs, err := tb.Files.Upload(ctx, "bob", "b.txt", "", strings.NewReader("bob's"))
	if err != nil {
		t.Fatal(err)
	}
	text := base64.StdEncoding.EncodeToString([]byte("plain text, not a PNG"))
	many := []responses.ResponseInputContentUnionParam{textPart("x")}
	for range 11 {
		many = append(many, filePart(responses.ResponseInputFileParam{Filename: openaisdk.String("a.txt"), FileData: openaisdk.String(text)}))
	}
	for _, tc := range []struct {
		name   string
		input  responses.ResponseNewParamsInputUnion
		status int
		param  string
	}{
		{"another URL", userInput(textPart("x"), imagePart("https://example.com/cat.png", "")), 400, "input[0].content[1].image_url"},
		{"another user's file", userInput(textPart("x"), imagePart("", bobs.ID.String())), 400, "input[0].content[1]"},
		{"an unknown file", userInput(textPart("x"), filePart(responses.ResponseInputFileParam{FileID: openaisdk.String("5d0c3b4e-6c9a-4a55-9a38-0d36c8a0f001")})), 400, "input[0].content[1]"},
		{"an OpenAI file id", userInput(filePart(responses.ResponseInputFileParam{FileID: openaisdk.String("file-abc")})), 400, "input[0].content[0].file_id"},
		{"file_data without filename", userInput(filePart(responses.ResponseInputFileParam{FileData: openaisdk.String(text)})), 400, "input[0].content[0].filename"},
		{"file_data not base64", userInput(filePart(responses.ResponseInputFileParam{Filename: openaisdk.String("a"), FileData: openaisdk.String("%%%")})), 400, "input[0].content[0].file_data"},
		{"a file_url elsewhere", userInput(filePart(responses.ResponseInputFileParam{FileURL: openaisdk.String("https://example.com/a.pdf")})), 400, "input[0].content[0].file_url"},
		{"a media type the bytes contradict", userInput(textPart("x"), imagePart("data:image/png;base64,"+text, "")), 400, "input[0].content[1]"},
		{"no source", userInput(imagePart("", "")), 400, "input[0].content[0]"},
		{"too many files", userInput(many...), 400, "input"},
		{"a bad name", userInput(filePart(responses.ResponseInputFileParam{Filename: openaisdk.String("../etc/passwd"), FileData: openaisdk.String(text)})), 400, "input[0].content[0]"},
	} {
		before := counts(t, tb)
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true), Input: tc.input})
		e := apiErr(t, err, tc.status, tc.param)
		if after := counts(t, tb); after != before {
			t.Errorf("%s: refused (%s), but the rows went from %s to %s", tc.name, e.Message, before, after)
		}
	}
}
