package agent

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/proctorhq/proctor/examples/environments/canvas/canvasenv"
	"github.com/proctorhq/proctor/internal/fakemodel"
)

// TestAgentSeesScreenshots runs the canvas example's copy-color scenario, whose prompt does not
// name the color to paint: only the screenshot shows it. The scripted model reads the pixels of
// the PNG it is sent, so each adapter earns reward 1 only if the image reaches the model, and the
// model answers only if the environment's instructions open the system prompt.
func TestAgentSeesScreenshots(t *testing.T) {
	for _, provider := range []string{"openai", "anthropic"} {
		t.Run(provider, func(t *testing.T) {
			painter := fakemodel.NewPainter(t, canvasenv.Palette(), "A 64×64 canvas.")
			var model Model
			var err error
			if provider == "openai" {
				model, err = NewOpenAI(OpenAIConfig{BaseURL: painter.URL + "/v1", Model: "painter", Logger: discardLogger()})
			} else {
				model, err = NewAnthropic(AnthropicConfig{BaseURL: painter.URL, APIKey: "k", Model: "painter", Logger: discardLogger()})
			}
			if err != nil {
				t.Fatal(err)
			}
			p := startExample(t, "canvas", ConnectOptions{})
			for _, color := range []string{"blue", "yellow"} {
				args := map[string]any{"x": 30, "y": 20, "size": 12, "color": color}
				res, err := RunEpisode(testContext(t), p.env, model, Episode{Scenario: "copy-color", Args: args, MaxSteps: 5})
				if err != nil {
					t.Fatalf("%s: %v (refusals: %q)", color, err, painter.Refusals())
				}
				if res.Reward != 1 || res.StopReason != StopDone {
					t.Fatalf("%s: reward %v, stop %s, reason %q; the model saw %d image(s); conversation %+v", color, res.Reward, res.StopReason, res.RewardReason, painter.Images(), res.Messages)
				}
				if strings.Contains(res.Messages[0].Content, color) {
					t.Fatalf("the prompt names the color: %q", res.Messages[0].Content)
				}
			}
			if painter.Images() == 0 {
				t.Errorf("the model was sent no image")
			}
		})
	}
}

// The images of a run of tool results follow the run, in one user message: OpenAI wants every
// tool message right after the assistant turn that called it.
func TestOpenAIImagesFollowTheToolMessages(t *testing.T) {
	png := NewImage("image/png", []byte("\x89PNG fake"))
	m, err := NewOpenAI(OpenAIConfig{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	params, err := m.(*openAIModel).params(StepRequest{Messages: []Message{
		{Role: RoleUser, Content: "go"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "a", Name: "shot"}, {ID: "b", Name: "shot"}}},
		{Role: RoleTool, ToolCallID: "a", Content: "one", Images: []Image{png, NewImage("image/svg+xml", []byte("<svg/>"))}},
		{Role: RoleTool, ToolCallID: "b", Content: "two", Images: []Image{{MIMEType: "image/png", Size: 9, Key: "k"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, p := range params.Messages {
		switch {
		case p.OfUser != nil:
			roles = append(roles, "user")
		case p.OfAssistant != nil:
			roles = append(roles, "assistant")
		case p.OfTool != nil:
			roles = append(roles, "tool")
		default:
			roles = append(roles, "other")
		}
	}
	if strings.Join(roles, ",") != "user,assistant,tool,tool,user" {
		t.Fatalf("roles = %v", roles)
	}
	first := params.Messages[2].OfTool.Content.OfString.Value
	if !strings.Contains(first, "image/svg+xml") || !strings.Contains(first, "1 image(s): in the next user message") {
		t.Errorf("the first tool message = %q, want a note on the SVG and a pointer to the PNG", first)
	}
	if second := params.Messages[3].OfTool.Content.OfString.Value; !strings.Contains(second, "its bytes were not kept") {
		t.Errorf("the second tool message = %q, want a note on the image without bytes", second)
	}
	parts := params.Messages[4].OfUser.Content.OfArrayOfContentParts
	if len(parts) != 2 || parts[1].OfImageURL == nil || parts[1].OfImageURL.ImageURL.URL != "data:image/png;base64,iVBORyBmYWtl" {
		t.Errorf("the user message's parts = %+v, want the call's label and the PNG as a data URL", parts)
	}
}

func TestReadContentNotesWhatModelsAreNotSent(t *testing.T) {
	size := int64(3)
	text, images := readContent([]mcp.Content{
		&mcp.TextContent{Text: "painted"},
		&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "canvas://a.png", MIMEType: "image/png", Blob: []byte("png")}},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "notes://1", Text: "a note"}},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "data://x", MIMEType: "application/zip", Blob: []byte("zip")}},
		&mcp.ResourceLink{URI: "canvas://image", Name: "the live canvas", MIMEType: "image/png", Size: &size},
	})
	want := "painted\n[audio (audio/wav, 4 bytes) was left out: models are not sent audio]\n[resource canvas://a.png: the image below]\n" +
		"[resource notes://1]\na note\n[resource data://x (application/zip, 3 bytes) was left out: models are sent text and images only]\n" +
		"[a link to the resource canvas://image, the live canvas, image/png]"
	if text != want {
		t.Errorf("text =\n%s\nwant\n%s", text, want)
	}
	if len(images) != 1 || images[0].MIMEType != "image/png" || string(images[0].Data) != "png" || images[0].Size != 3 || len(images[0].SHA256) != 64 {
		t.Errorf("images = %+v", images)
	}
}
