"""The typed bodies of the JSON API (``/v1/*``): one pydantic request model and one response model
per route. Requests refuse unknown fields (``extra="forbid"``), so a misspelt parameter is named in
the 422 answer instead of being ignored; the descriptions become the OpenAPI schema (``/docs``).
The routes themselves are in ``bertviz_app.serve.server``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PredictRequest", "TagRequest", "AttentionRequest", "ExplainRequest", "CompareRequest", "SummaryRequest",
           "DeleteRequest", "EvaluateRequest", "PredictResponse", "AttentionResponse", "ExplainResponse",
           "CompareResponse", "SummaryResponse", "EvaluateResponse", "MessageResponse", "ErrorResponse", "TagResponse",
           "EntityAnswer", "AnswerRequest", "AnswerResponse", "SpanAnswer"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


_MODEL = Field(None, description="Model to use: a registered name, a run, a folder (where allowed) or a Hub id; "
                                  "null or \"\": the app's default model.")
_PAIR = Field("", description="Second text, for sentence-pair models (\"\" or null: none).")
_TEXT = Field(description="The text to classify or explain.", examples=["A gorgeous, moving film."])


class PredictRequest(_Body):
    text: str = _TEXT
    pair: str | None = _PAIR
    model: str | None = _MODEL
    window: bool = Field(False, description="Classify a text longer than the model reads whole, in overlapping "
                                            "windows whose logits are pooled (else it is cut: truncated=true).")
    stride: int = Field(128, description="With window: tokens shared by neighbouring windows.")
    pool: str = Field("mean", description="With window: how window logits are combined, mean or max.")
    calibrated: bool = Field(True, description="Apply the temperature saved in the model folder's calibration.json "
                                               "(if any); false: the model's raw probabilities.")


class TagRequest(_Body):
    text: str = Field(description="The text to tag.", examples=["Ada Lovelace met Charles Babbage in London."])
    model: str | None = Field(None, description="A token classification (...ForTokenClassification) model: a "
                                                "registered name, a run, a folder (where allowed) or a Hub id; null "
                                                "or \"\": the app's default model (a sequence classifier is refused "
                                                "with a message naming its head).")
    aggregation: str = Field("simple", description="simple: entities from word-pieces; first, average or max: each "
                                                   "word's pieces merged first (transformers' aggregation_strategy).")
    window: bool = Field(True, description="Read a text longer than the model reads in overlapping windows, each "
                                           "piece's label from the window where it is most central (false: cut it, "
                                           "truncated=true).")
    stride: int | None = Field(None, description="With window: tokens shared by neighbouring windows (null: a "
                                                 "quarter of the window).")


class AnswerRequest(_Body):
    question: str = Field(description="The question.", examples=["Who met Charles Babbage?"])
    context: str = Field(description="The text the answer is a span of.",
                         examples=["Ada Lovelace met Charles Babbage in London."])
    model: str | None = Field(None, description="A question answering (...ForQuestionAnswering) model: a registered "
                                                "name, a run, a folder (where allowed) or a Hub id; null or \"\": the "
                                                "app's default model (a classifier or a tagger is refused with a "
                                                "message naming its head).")
    n_best: int = Field(5, description="How many of the best spans to list (n_best).")
    max_answer_len: int = Field(30, description="The longest answer, in tokens.")
    no_answer_threshold: float | None = Field(0.0, description="Answer \"no answer\" (\"\" at 0:0) when its score "
                                                               "beats the best span's by more than this (SQuAD 2.0's "
                                                               "null threshold); null: always the best span.")
    stride: int | None = Field(None, description="Context tokens shared by neighbouring windows of a context longer "
                                                 "than the model reads (null: 128, or half the window).")


class AttentionRequest(_Body):
    text: str = _TEXT
    pair: str | None = _PAIR
    layer: int = Field(0, description="0: every layer; k: layer k only (1-based), as a list of one.")
    model: str | None = _MODEL
    measure: str = Field("raw", description="Context-mixing measure: raw (attention weights), norm (attention-norm, "
                                            "Kobayashi et al. 2020), value_zeroing (Mohebbi et al. 2023) or alti "
                                            "(Ferrando et al. 2022).")
    window: bool = Field(False, description="A text longer than the model reads: one window's attention (window_index) "
                                            "and, under \"document\", the [CLS] rows merged over every window.")
    stride: int | None = Field(None, description="With window: tokens shared by neighbouring windows (null: 128).")
    window_index: int = Field(0, description="With window: which window's attention, 0-based.")


_STEPS = Field(None, description="Exactly this many integration steps (with tolerance unset or 0); null: chosen.")
_TOL = Field(None, description="Choose the steps for this relative convergence delta (0: exactly n_steps; "
                               "null: the default, 0.05).")


class ExplainRequest(_Body):
    text: str = _TEXT
    target: str | None = Field("", description="Class to explain (\"\" or null: the predicted one).")
    baseline: str = Field("pad", description="Integrated Gradients' baseline: pad, mask, unk or zero.")
    n_steps: int | None = _STEPS
    pair: str | None = _PAIR
    model: str | None = _MODEL
    tolerance: float | None = _TOL
    window: bool = Field(False, description="Explain a text longer than the model reads whole: each of predict's "
                                            "windows explained, the scores merged (one per token of the document).")
    stride: int | None = Field(None, description="With window: tokens shared by neighbouring windows (null: 128).")


class ExplainAnswerRequest(_Body):
    question: str = Field(description="The question.", examples=["Who met Charles Babbage?"])
    context: str = Field(description="The text the answer is a span of.",
                         examples=["Ada Lovelace met Charles Babbage in London."])
    model: str | None = AnswerRequest.model_fields["model"]
    span: list[int] | str | None = Field(None, description="What is explained: null or \"\" the predicted answer; "
                                                          "\"no-answer\" (the first position's start and end, SQuAD "
                                                          "2.0); [start, end] characters of the context (the tokens "
                                                          "overlapping them).")
    parts: str | list[str] | None = Field("span", description="span (log p(start) + log p(end)), start or end alone; "
                                                             "a list or comma-separated: several, computed together.")
    objective: str = Field("logprob", description="logprob (the parts' log-probabilities) or prob (the span's "
                                                  "probability p(start) x p(end), its exponent).")
    baseline: str = Field("pad", description="Integrated Gradients' baseline: pad, mask, unk or zero.")
    n_steps: int | None = _STEPS
    tolerance: float | None = _TOL
    max_answer_len: int = Field(30, description="The longest span, in tokens (the predicted answer's, and a span "
                                                "given).")
    stride: int | None = AnswerRequest.model_fields["stride"]
    method: str = Field("integrated_gradients", description="integrated_gradients, occlusion, lime or kernel_shap.")
    n_samples: int | None = Field(None, description="lime and kernel_shap: word subsets sampled (null: the default "
                                                    "for the number of words).")
    seed: int = Field(0, description="lime and kernel_shap: the sampling's seed.")
    features: str = Field("context", description="lime and kernel_shap: whose words are sampled, and faithfulness "
                                                 "removes: context (the question kept) or both.")
    faithfulness: bool = Field(False, description="Also each explanation's ERASER comprehensiveness and sufficiency "
                                                  "on the span's probability (extra forward passes).")


class CompareRequest(ExplainRequest):
    methods: str | list[str] | None = Field("", description="Comma-separated names or a list (\"\": all of "
                                                            "integrated_gradients, gradient_x_input, saliency, "
                                                            "occlusion, kernel_shap, lime; ig = "
                                                            "integrated_gradients; the context-mixing measures raw, "
                                                            "norm, value_zeroing, alti when named).")
    top_k: int = Field(3, description="Top tokens compared between methods.")
    seed: int = Field(0, description="Random seed of kernel_shap and lime.")


class SummaryRequest(_Body):
    model: str | None = _MODEL


class DeleteRequest(_Body):
    pass


class EvaluateRequest(_Body):
    csv: str = Field(description="The labelled file's text: a header row, then one row per example (comma, tab, "
                                 "semicolon or | separated), at most BERTVIZ_MAX_EVALUATE_MB with the rest of the "
                                 "body. Larger files: `bertviz-app evaluate FILE`.",
                     examples=["text,label\nA gorgeous, moving film.,positive\nA tedious slog.,negative\n"])
    text_column: str | None = Field(None, description="Column with the text (null: guessed).")
    label_column: str | None = Field(None, description="Column with the true label (null: guessed). Labels are the "
                                                       "model's class names, or its ids 0 to C-1.")
    pair_column: str | None = Field(None, description="Column with a second text, for sentence-pair models.")
    words: list[str] = Field([], description="Also slice the rows containing each word (case-insensitive, whole "
                                             "word).")
    model: str | None = _MODEL
    hold_out: float = Field(0.5, description="Share of the rows the temperature is fitted on; the others measure "
                                             "it.")
    seed: int = Field(0, description="Seed of that random split.")
    layers: bool = Field(False, description="Also probe every layer: a linear probe's cross-validated accuracy on the "
                                            "[CLS] vector and on the mean of the word tokens' vectors, from the same "
                                            "forward pass as the predictions (answered under \"layers\").")
    compare_with: str | None = Field(None, description="A second model, named as model is (a registered name or a "
                                                       "run; null or \"\": none), evaluated on the same rows and "
                                                       "compared (answered under \"comparison\"). Its classes must "
                                                       "be the same names as the model's.")


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")  # the core's records may carry more than listed here


class PredictResponse(_Answer):
    text: str
    label: str
    scores: dict[str, float] = Field(description="Probability of each class.")
    truncated: bool = Field(description="The text was longer than the model reads and was cut.")
    pair: str | None = None
    windows: int | None = Field(None, description="With window=true: how many windows were read.")
    temperature: float | None = Field(None, description="The calibration.json temperature the logits were divided "
                                                        "by (absent: raw probabilities).")
    notices: list[str] | None = Field(None, description="Notes on how far to trust this answer, e.g. a pair given "
                                                        "to a model whose record says it was trained on single "
                                                        "texts (null: nothing to note; a model whose training is "
                                                        "not recorded gets no note).")


class EntityAnswer(_Answer):
    text: str = Field(description="The entity's characters: text[start:end].")
    label: str = Field(description="Its label, without a B-/I- prefix.")
    start: int
    end: int
    score: float = Field(description="The mean of its word-pieces' (or words') probabilities of their labels.")


class TagResponse(_Answer):
    text: str
    entities: list[EntityAnswer]
    tokens: list[str] = Field(description="The text's word-pieces (special tokens left out).")
    labels: list[str] = Field(description="Each word-piece's most probable label, with its B-/I- prefix.")
    truncated: bool = Field(description="The text was cut at the model's length (window=false only).")


class SpanAnswer(_Answer):
    answer: str = Field(description="The span's characters: context[start:end].")
    start: int
    end: int
    score: float = Field(description="p(start) x p(end) over the context's positions (summed over spans of the same "
                                     "text, as transformers' question-answering pipeline sums them).")


class AnswerResponse(_Answer):
    question: str
    answer: str = Field(description="The answer, context[start:end]; \"\" (at 0:0) where the context holds none.")
    start: int
    end: int
    score: float = Field(description="The answer's score (the no-answer score where there is none).")
    no_answer: bool = Field(description="The no-answer score beat the best span's by more than the threshold.")
    no_answer_score: float = Field(description="p(start = [CLS]) x p(end = [CLS]), the lowest over the windows.")
    n_best: list[SpanAnswer] = Field(description="The best spans, best first.")
    windows: int = Field(description="How many windows the context was read in.")


class SpanExplanation(_Answer):
    target: dict = Field(description="What is explained: kind (predicted, chosen or no-answer), part (span, start or "
                                     "end), text, start, end (characters), tokens [first, last], p_start, p_end, "
                                     "objective.")
    tokens: list[str] = Field(description="The window's tokens, special tokens included.")
    sides: list[str | None] = Field(description="Each token's side: question, context or null (a special token).")
    scores: list[float] = Field(description="Each token's attribution; they sum to f_x - f_baseline - delta.")
    words: list[dict] = Field(description="Per word of each side: side, word, start, end (characters into its side), "
                                          "score (its tokens' sum), tokens.")
    totals: dict[str, float] = Field(description="The summed scores of the question's and the context's tokens.")
    f_x: float
    f_baseline: float
    delta: float | None = Field(description="Convergence delta: f(x) - f(baseline) - sum(scores).")
    relative_delta: float | None = None
    n_steps: int | None = None
    tolerance: float | None = None
    baseline: str
    window: int = Field(description="The window explained (0: the first or only one).")
    windows: int = Field(description="How many windows the context took.")
    method: str | None = Field(None, description="The method the scores are from.")
    faithfulness: dict | None = Field(None, description="With faithfulness: true, comprehensiveness and sufficiency "
                                                        "per k (the share of words removed) and averaged (aopc).")


class ExplainAnswerResponse(_Answer):
    question: str
    context: str
    explanations: list[SpanExplanation] = Field(description="One per part asked, in order.")


class AttentionResponse(_Answer):
    tokens: list[str]
    measure: str = Field(description="The measure the numbers are (raw, norm, value_zeroing or alti).")
    weights: list[list[list[list[float]]]] = Field(description="weights[layer][head][i][j]: what token i takes from "
                                                               "token j (raw: query i attends to key j); one head for "
                                                               "the per-layer measures, value_zeroing and alti.")
    combined: list[list[list[float]]] = Field(description="combined[layer][i][j]: the layer's matrix, heads combined; "
                                                          "rows sum to 1.")
    aggregated: list[list[list[float]]] = Field(description="aggregated[layer][i][j]: across layers 1 to layer "
                                                            "(rollout-style); rows sum to 1.")
    cls_scores: list[float] = Field(description="The last layer's aggregated [CLS] row: a ranking of the tokens.")
    truncated: bool


class ExplainResponse(_Answer):
    tokens: list[str]
    attributions: list[float]
    target: str
    delta: float | None = Field(description="Convergence delta: f(x) - f(baseline) - sum(attributions).")
    relative_delta: float | None = None
    n_steps: int
    tolerance: float | None = None
    baseline: str
    f_x: float | None = None
    f_baseline: float | None = None
    method: str | None = None
    truncated: bool | None = None
    windows: int | None = Field(None, description="With window=true: how many windows were read; "
                                                  "window_predictions lists each one's prediction.")


class CompareResponse(_Answer):
    tokens: list[str]
    methods: dict[str, dict[str, Any]] = Field(description="Each method's attribution, seconds, passes, ERASER "
                                                           "faithfulness and rollout_spearman.")
    spearman: list[list[float | None]]
    top_k: int
    top_k_overlap: list[list[float | None]]
    rollout: list[float | None]
    most_faithful: str | None = None
    reading: str | None = None


class SummaryResponse(_Answer):
    name: str
    architecture: str
    head: str = Field(description="What the model answers: sequence classification or token classification.")
    labels: list[str]
    total_params: int
    num_layers: int
    device: str
    dtype: str


class EvaluateResponse(_Answer):
    rows: int = Field(description="Rows evaluated (skipped_rows: rows without a text or a label).")
    accuracy: float
    macro_f1: float | None = Field(description="Over the classes in the labels or the predictions; null with one "
                                               "class.")
    per_class: dict[str, dict[str, float]] = Field(description="Each class's precision, recall, f1 and support.")
    confusion: dict[str, Any] = Field(description="matrix[i][j]: rows of true class labels[i] predicted as labels[j].")
    slices: list[dict[str, Any]] = Field(description="Worst first: kind, name, size, correct, accuracy and its 95% "
                                                     "Wilson interval.")
    calibration: dict[str, Any] = Field(description="ece, nll, brier, temperature, ece_after, nll_after, "
                                                    "fitted_on_rows, measured_on_rows, note; helps (on the measured "
                                                    "rows the NLL is lower and the ECE not higher: only then is the "
                                                    "temperature worth saving) and judgement (why, with the numbers).")
    misclassified: list[dict[str, Any]] = Field(description="The first 100 rows the model gets wrong, most confident "
                                                            "first: row, text, true, predicted, confidence.")
    layers: list[dict[str, Any]] | None = Field(None, description="With layers=true: per layer (0 = embeddings) "
                                                                 "layer, cls_probe_accuracy, mean_probe_accuracy, "
                                                                 "cls_std, mean_std, folds; null when no probe can "
                                                                 "be fitted (one class, or a class of one row: see "
                                                                 "notices). Absent without layers.")
    comparison: dict[str, Any] | None = Field(None, description="With compare_with: models {a, b}, accuracy and "
                                                                "macro_f1 {a, b}, both_correct, only_a_correct, "
                                                                "only_b_correct, both_wrong, disagreements, "
                                                                "mcnemar_p (exact, two-sided), reading, slices (B's "
                                                                "accuracy on each of A's slices, largest difference "
                                                                "first) and the first 100 disagreeing_rows. Absent "
                                                                "without compare_with.")


class MessageResponse(_Answer):
    message: str


class ErrorResponse(BaseModel):
    error: str = Field(description="What went wrong and what to send instead.")
